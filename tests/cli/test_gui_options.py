"""The GUI's own options: --page takes the sidebar's titles as well as the short names (any case) and
--help lists them; --install-engine is the guided engine install's entry."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from app.backends.llama_server.engine import SOURCE_PATH, EngineStatus
from app.cli import _gui_parser
from app.ui.app import engine_offer
from tests.cli.cli_property import invoke
from tests.fakes.raw_http import closed_port
from tests.ui.app.conftest import deck_factory  # noqa: F401 - the GUI composition root's fixture


@pytest.mark.parametrize(("given", "page"), [
    ("Prompt", "console"), ("prompt", "console"), ("console", "console"), ("BENCHMARK", "bench"),
    ("bench", "bench"), ("Dashboard", "dashboard"), ("server", "server"), (" Models ", "models"), ("Fleet", "fleet"),
])
def test_page_takes_the_sidebar_titles_and_the_short_names(given: str, page: str) -> None:
    assert _gui_parser().parse_args(["--page", given]).page == page


def test_an_unknown_page_is_one_line_naming_the_pages() -> None:
    code, out, err = invoke(["--page", "settings"])
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert err.startswith("ollama-deck: argument --page: 'settings' is not a page; choose one of dashboard, server, "
                          "prompt (or console), models, benchmark (or bench), fleet")


def test_fleet_takes_a_fleet_file_and_refuses_a_bad_one_in_one_line_with_its_line(tmp_path: Path) -> None:
    good = tmp_path / "fleet.toml"
    good.write_text('[[server]]\nname = "a"\nurl = "http://127.0.0.1:8081"\nbackend = "llama_server"\n')
    assert _gui_parser().parse_args(["--fleet", str(good)]).fleet == str(good)
    bad = tmp_path / "bad.toml"
    bad.write_text('[[server]]\nname = "a"\nurl = "http://127.0.0.1:8081"\nbackend = "vllm"\n')
    code, out, err = invoke(["--fleet", str(bad)])
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert f"the fleet file {bad}: line 4, server[0].backend: 'vllm' is not a backend this app knows — write one " \
           "of: ollama" in err
    code, _out, err = invoke(["--fleet", str(tmp_path / "missing.toml")])
    assert code == 2 and "cannot read the fleet file" in err


def test_help_lists_the_pages_and_the_engine_options() -> None:
    code, out, _err = invoke(["--help"])
    text = " ".join(out.split())
    assert code == 0
    for needle in ("dashboard, server, prompt (or console), models, benchmark (or bench)", "--install-engine",
                   "--demo", "--backend NAME", "--config-dir DIR", "--fleet FILE"):
        assert needle in text


def test_every_sidebar_title_opens_its_own_page(qtbot, tmp_path: Path, deck_factory) -> None:  # noqa: F811
    args = argparse.Namespace(config_dir=str(tmp_path / "cfg"), url=f"http://127.0.0.1:{closed_port()}",
                              page=None, screenshot=None, backend=None, demo=False)
    window = deck_factory(args).window
    for row in range(window.sidebar.count()):
        title = window.sidebar.item(row).text()
        window.show_page(_gui_parser().parse_args(["--page", title]).page)
        assert window.sidebar.currentRow() == row, title


def test_install_engine_says_what_is_installed_when_nothing_is_missing(monkeypatch) -> None:
    complete = EngineStatus(Path("/x/llama-server"), SOURCE_PATH, Path("/x/m.gguf"), True, (), ())
    monkeypatch.setattr(engine_offer, "engine_status", lambda: complete)
    assert invoke(["--install-engine"]) == (0, complete.summary + "\n", "")


def test_install_engine_takes_no_window_options() -> None:
    code, _out, err = invoke(["--install-engine", "--demo"])
    assert code == 2 and "--install-engine opens the install window only" in err
