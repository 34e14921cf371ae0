"""The window attached at a fleet's balancer (Debian's nginx in front of two real llama-servers, named in a
--fleet file): it attaches through the proxy, and the Benchmark page's sweeps read each server behind it for its
share, as the page says."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.cli import _gui_parser
from app.core.server.state import ServerState
from tests.backends.llama_server.engine_server import RunningServer
from tests.fleet_fixtures import Method

pytestmark = [pytest.mark.engine, pytest.mark.slow]
WAIT_MS = 30_000


def test_a_window_at_the_balancer_attaches_and_its_sweeps_read_each_server_behind_it(
        qtbot, tmp_path: Path, deck_factory, backend_pair: tuple[RunningServer, RunningServer],
        balancer_over) -> None:
    a, b = backend_pair
    balancer = balancer_over([a.base_url, b.base_url], Method.ROUND_ROBIN)
    fleet = tmp_path / "fleet.toml"
    fleet.write_text(f'[[server]]\nname = "box-a"\nurl = "{a.base_url}"\nbackend = "llama_server"\n'
                     f'[[server]]\nname = "box-b"\nurl = "{b.base_url}"\nbackend = "llama_server"\n'
                     f'[balancer]\nname = "nginx"\nurl = "{balancer.base_url}"\nservers = ["box-a", "box-b"]\n')
    args = _gui_parser().parse_args(["--backend", "llama_server", "--url", balancer.base_url, "--fleet", str(fleet),
                                     "--config-dir", str(tmp_path / "cfg"), "--page", "bench"])
    deck = deck_factory(args)

    header = deck.window.header
    qtbot.waitUntil(lambda: header.state_pill.text() == ServerState.RUNNING_ATTACHED.value, timeout=WAIT_MS)
    assert [(x.name, x.url) for x in deck.bench_page.sweeps.behind] == [("box-a", a.base_url), ("box-b", b.base_url)]
    mode = deck.bench_page.editor.mode_label
    qtbot.waitUntil(lambda: "At a load balancer" in mode.text(), timeout=WAIT_MS)
    assert "box-a, box-b" in mode.text() and "share of the requests and tokens" in mode.text()
