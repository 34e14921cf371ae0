"""Where a managed server's stdout and stderr go: a file, read back line by line as it grows.

Not a pipe: a pipe breaks when the app dies, and a Go program such as `ollama serve` exits at its
next write to a broken stdout or stderr (it logs every request), leaving its runner holding the
GPU's memory. Writing to a file, a server whose app was killed keeps serving; the next start can
take it over and read its log from the same file."""

from __future__ import annotations

import asyncio
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

POLL_S = 0.05
CHUNK_BYTES = 1 << 20  # also the longest line passed whole; a longer one arrives in pieces


def open_for_server(path: Path | None) -> tuple[int, Path, bool]:
    """A write descriptor for the server's output, the file's path, and whether it is a temporary
    file to delete afterwards. path is emptied first; when it is None or cannot be written, a
    temporary file is used instead. Raises OSError when not even that can be made."""
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            # O_APPEND: the server and its runners share the file, and each write lands at its end.
            return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o600), path, False
        except OSError:
            pass
    fd, name = tempfile.mkstemp(prefix="ollama-deck-server-", suffix=".log")
    # Its runners inherit this descriptor, and so its offset: their writes interleave, never overlap.
    return fd, Path(name), True


class OutputReader:
    """Passes the file's complete lines to on_line as they are written (on the event loop), from
    its start or from its end; finish() reads what is left, the last partial line included."""

    def __init__(self, path: Path, on_line: Callable[[str], None], *, from_end: bool = False,
                 delete_after: bool = False) -> None:
        self.path = path
        self._on_line = on_line
        self._delete_after = delete_after
        self._handle = open(path, "rb")  # closed when following ends
        if from_end:
            self._handle.seek(0, os.SEEK_END)
        self._partial = b""
        self._finishing = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._follow())

    async def finish(self, timeout_s: float = 1.0) -> None:
        """Read the rest and stop (call once the writers are gone)."""
        self._finishing.set()
        try:
            await asyncio.wait_for(asyncio.shield(self._task), timeout_s)
        except TimeoutError:
            self._task.cancel()

    def catch_up(self) -> None:
        """Pass on every complete line written so far, now (e.g. before saying the server is ready,
        so its status and its log agree); the follower goes on from there."""
        if self._handle.closed:
            return
        while self._pump():
            pass

    def cancel(self) -> None:
        """Stop following at once (the file is left as it is)."""
        self._task.cancel()

    async def _follow(self) -> None:
        try:
            while True:
                if self._pump():
                    continue
                if self._finishing.is_set():
                    break
                try:
                    await asyncio.wait_for(self._finishing.wait(), POLL_S)
                except TimeoutError:
                    pass
            if self._partial:
                self._emit(self._partial)
        finally:
            self._handle.close()
            if self._delete_after:
                try:
                    os.unlink(self.path)
                except OSError:
                    pass

    def _pump(self) -> bool:
        """Pass on what was written since the last call; False when nothing was."""
        chunk = self._handle.read(CHUNK_BYTES)
        if not chunk:
            return False
        *lines, self._partial = (self._partial + chunk).split(b"\n")
        for raw in lines:
            self._emit(raw)
        if len(self._partial) >= CHUNK_BYTES:  # an over-long line arrives in pieces
            self._emit(self._partial)
            self._partial = b""
        return True

    def _emit(self, raw: bytes) -> None:
        self._on_line(raw.decode("utf-8", errors="replace").rstrip("\r"))


__all__ = ["OutputReader", "open_for_server"]
