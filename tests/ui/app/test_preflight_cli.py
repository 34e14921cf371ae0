"""`ollama-deck --preflight` end to end, in a fresh process without a display: the command line as the window's
parser reads it, run_preflight's lines and exit code — on the real embedded engine, on the stand-in Ollama with
no CJK font, and with no server at all."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

from tests.ui.presenter.preflight_fonts import cjk_font, font_folder, latin_font, run_python

RUN = """
import sys
from app.cli import _gui_parser
from app.ui.app.preflight import run_preflight
sys.exit(run_preflight(_gui_parser().parse_args(["--preflight", *sys.argv[1:]])))
"""


def preflight(tmp_path: Path, env: dict[str, str], *args: str):
    code = RUN.replace("sys.argv[1:]", repr([*args, "--config-dir", str(tmp_path / "cfg")]))
    done = run_python(code, env)
    lines = done.stdout.strip().splitlines()
    checks = {m.group(2): (m.group(1), m.group(3)) for line in lines
              if (m := re.match(r"(PASS|WARN|FAIL)  (server|model|port|gpu|fonts|screen|step time)  (.*)$", line))}
    return done, lines, checks


@pytest.mark.engine
@pytest.mark.slow
def test_demo_preflight_on_the_embedded_engine_passes_here(tmp_path: Path, llama_server_binary, bundled_model) -> None:
    env = font_folder(tmp_path, [latin_font(), cjk_font()])
    done, lines, checks = preflight(tmp_path, env, "--demo")
    assert done.returncode == 0, done.stdout + done.stderr
    assert lines[0].startswith("Pre-flight of “One GPU, many users” (builtin, 5 steps, 5 min) on llama-server (embedded)")
    assert "Qt platform: offscreen (no DISPLAY" in lines[0]
    assert list(checks) == ["server", "model", "port", "gpu", "fonts", "screen", "step time"]
    assert checks["server"] == ("PASS", f"llama-server (embedded) is installed: {llama_server_binary}")
    assert checks["model"] == ("PASS", f"the bundled model is installed: {bundled_model.name}, 98 MB")
    assert checks["port"][0] == "PASS" and "is free (--demo picks a free port when it starts)" in checks["port"][1]
    assert checks["gpu"][0] in ("PASS", "WARN")
    assert checks["fonts"][0] == "PASS"
    assert checks["screen"][0] == "WARN" and checks["screen"][1].startswith("no real screen")
    assert checks["step time"][0] in ("PASS", "WARN")
    assert re.match(r"96 tokens: TTFT \d+ ms, [\d.]+ tok/s; the script takes about", checks["step time"][1])
    assert re.match(r"\d passed, \d warned, 0 failed: ready", lines[-1])


def test_preflight_on_a_running_ollama_without_a_cjk_font_fails_on_the_fonts(tmp_path: Path, make_fake_ollama) -> None:
    fake = make_fake_ollama(tokens_per_s=400.0)
    env = font_folder(tmp_path, [latin_font()])
    done, lines, checks = preflight(tmp_path, env, "--url", fake.url)
    assert done.returncode == 1, done.stdout + done.stderr
    assert checks["server"][0] == "PASS" and f"answers at {fake.url}" in checks["server"][1]
    assert checks["model"][0] == "PASS" and checks["port"][0] == "PASS"
    assert "in use by the server itself" in checks["port"][1]
    assert checks["fonts"][0] == "FAIL"
    assert "Chinese (Han)" in checks["fonts"][1] and "— fix: install a CJK font: `sudo apt install fonts-noto-cjk`" in \
        checks["fonts"][1]
    assert checks["step time"][0] in ("PASS", "WARN")
    assert lines[-1].endswith("failed: fix fonts before the talk")


def test_preflight_with_no_server_and_no_ollama_fails_with_the_install(tmp_path: Path) -> None:
    from tests.fakes.ollama.server_fixtures import free_port

    env = {**font_folder(tmp_path, [latin_font()]), "PATH": os.path.dirname(sys.executable)}
    port = free_port()
    done, lines, checks = preflight(tmp_path, env, "--url", f"http://127.0.0.1:{port}")
    assert done.returncode == 1, done.stdout + done.stderr
    assert checks["server"] == ("FAIL", f"nothing answers at http://127.0.0.1:{port} and Ollama is not installed — fix: "
                                        "Ollama is not installed (no `ollama` program on PATH). Install Ollama from "
                                        "https://ollama.com/download (Linux: `curl -fsSL https://ollama.com/install.sh "
                                        "| sh`), or set the path to the `ollama` program on the Server page (Paths & "
                                        "advanced). Or run `ollama-deck --demo` (the embedded engine).")
    assert checks["port"] == ("PASS", f"{port} on 127.0.0.1 is free")
    assert checks["model"][0] == "WARN" and checks["step time"][0] == "FAIL"
