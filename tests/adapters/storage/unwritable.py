"""Real read-only files and folders for tests, whoever runs them.

chmod cannot stop root from writing, so as root the code under test runs in a forked child that
has dropped to the unprivileged `nobody` (65534) before it touches the files; as any other user
it runs in the test process itself. Either way the child first checks that the condition holds.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import tempfile
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

NOBODY = 65534
AS_ROOT = os.geteuid() == 0
CHILD_TIMEOUT_S = 60.0


@contextlib.contextmanager
def reachable_folder() -> Iterator[Path]:
    """A fresh folder the unprivileged user can reach and write (pytest's tmp_path is private to root)."""
    folder = Path(tempfile.mkdtemp(prefix="ollama-deck-ro-"))
    os.chmod(folder, 0o755)
    give_away(folder)
    try:
        yield folder
    finally:
        for root, dirs, _files in os.walk(folder):
            for name in dirs:
                os.chmod(Path(root) / name, 0o755)
        os.chmod(folder, 0o755)
        shutil.rmtree(folder)


def give_away(path: Path) -> None:
    """Make path (and what is under it) belong to the user the code under test runs as."""
    if not AS_ROOT:
        return
    os.chown(path, NOBODY, NOBODY)
    if path.is_dir():
        for item in path.rglob("*"):
            os.chown(item, NOBODY, NOBODY)


def read_only(*paths: Path) -> None:
    """Take the write permission away (files 0444, folders 0555), after giving them to that user."""
    for path in paths:
        give_away(path)
        os.chmod(path, 0o555 if path.is_dir() else 0o444)


def run_unprivileged(fn: Callable[..., Any], *args: Any) -> Any:
    """fn(*args) as a user chmod applies to; its JSON-able result, or AssertionError with the child's error."""
    if not AS_ROOT:
        return fn(*args)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: drop root for good, run, report, and leave without running any cleanup
        os.close(read_end)
        try:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            reply = {"ok": fn(*args)}
        except BaseException as exc:  # noqa: BLE001 - everything goes back to the parent to fail the test
            reply = {"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()}
        with os.fdopen(write_end, "w") as out:
            out.write(json.dumps(reply))
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end) as pipe:
        ready, _, _ = select.select([pipe], [], [], CHILD_TIMEOUT_S)
        if not ready:
            os.kill(pid, signal.SIGKILL)
        text = pipe.read() if ready else ""
    os.waitpid(pid, 0)
    if not text:
        raise AssertionError(f"the unprivileged child gave no answer within {CHILD_TIMEOUT_S:g} s")
    reply = json.loads(text)
    if "error" in reply:
        raise AssertionError(f"in the unprivileged child: {reply['error']}\n{reply['trace']}")
    return reply["ok"]


__all__ = ["AS_ROOT", "give_away", "reachable_folder", "read_only", "run_unprivileged"]
