"""The command-line property the fuzz tests check, as plain functions a longer run can reuse
(benchmarks or a shell loop: `with isolated(tmp) as url: check_cli_argv(argv)` per example).

Property: any argv given to `estimate`, `prompt` or `bench` ends with an exit code in {0, 1, 2, 130},
never an uncaught exception or a traceback, and exit 2 comes with exactly one stderr line that
starts with the command's name and says what is wrong.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from app.cli import main
from tests.fakes.raw_http import closed_port

EXIT_CODES = {0, 1, 2, 130}


def invoke(argv: list[str], stdin: str = "a prompt from stdin\n") -> tuple[int, str, str]:
    """Run `ollama-deck ARGV` in this process: (exit code, stdout, stderr); exceptions propagate."""
    out, err = io.StringIO(), io.StringIO()
    saved_stdin = sys.stdin
    sys.stdin = io.StringIO(stdin)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(argv))
            except SystemExit as exc:  # argparse: --help (0) and its own errors (2)
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    finally:
        sys.stdin = saved_stdin
    return code, out.getvalue(), err.getvalue()


def check_cli_argv(argv: list[str]) -> int:
    """Run argv and assert the property; returns the exit code (AssertionError says what broke)."""
    try:
        code, _out, err = invoke(argv)
    except BaseException as exc:  # noqa: BLE001 - an escaped exception is exactly what the property forbids
        raise AssertionError(f"ollama-deck {argv!r} raised {type(exc).__name__}: {exc}") from exc
    assert code in EXIT_CODES, f"exit {code} for {argv!r}: {err[-400:]}"
    assert "Traceback" not in err, f"a traceback for {argv!r}: {err[-800:]}"
    if code == 2 and argv:
        lines = err.strip().splitlines()
        assert len(lines) == 1, f"exit 2 for {argv!r} with {len(lines)} lines: {err[-800:]}"
        assert lines[0].startswith(f"ollama-deck {argv[0]}: ") and len(lines[0]) > len(argv[0]) + 20, lines[0]
    return code


@contextlib.contextmanager
def isolated(folder: Path) -> Iterator[str]:
    """Run the commands where they touch nothing real: settings, history and relative output paths
    under `folder`, no `ollama` on PATH (so --managed cannot start a server); yields a URL whose port
    refuses connections, so runs that would measure fail at once with exit 1."""
    saved = {name: os.environ.get(name) for name in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME",
                                                      "XDG_CACHE_HOME", "PATH", "HOME")}
    cwd = os.getcwd()
    (folder / "bin").mkdir(parents=True, exist_ok=True)
    for name in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME", "HOME"):
        os.environ[name] = str(folder / name.lower())
    os.environ["PATH"] = str(folder / "bin")
    os.chdir(folder)
    try:
        yield f"http://127.0.0.1:{closed_port()}"
    finally:
        os.chdir(cwd)
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


__all__ = ["EXIT_CODES", "check_cli_argv", "invoke", "isolated"]
