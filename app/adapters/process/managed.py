"""One `ollama serve` process that ollama-deck spawned: its output lines, its exit, and stopping
its whole process tree (SIGTERM, grace period, then SIGKILL of every descendant)."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable, Mapping

import psutil

from app.adapters.process import procs as procs
from app.core.units import MIB
STREAM_LIMIT_BYTES = MIB
DRAIN_TIMEOUT_S = 1.0
EXIT_POLL_S = 0.05


class ManagedServer:
    """A spawned server in its own session, so its pid is the process group of its runners."""

    def __init__(self, process: asyncio.subprocess.Process, binary: str, on_line: Callable[[str], None]) -> None:
        self.process = process
        self.binary = binary
        self.stop_requested = False
        self._on_line = on_line
        try:
            self._handle: psutil.Process | None = psutil.Process(process.pid)
        except psutil.NoSuchProcess:
            self._handle = None
        self._known_tree: dict[int, psutil.Process] = {}
        self._readers = [
            asyncio.create_task(self._read_lines(process.stdout)),
            asyncio.create_task(self._read_lines(process.stderr)),
        ]
        self._exit = asyncio.create_task(self._wait_exit())

    @classmethod
    async def spawn(cls, binary: str, env: Mapping[str, str], on_line: Callable[[str], None]) -> ManagedServer:
        """Run `binary serve` with exactly env; raises OSError when it cannot be executed."""
        process = await asyncio.create_subprocess_exec(
            binary, "serve",
            env=dict(env),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
            limit=STREAM_LIMIT_BYTES,
        )
        return cls(process, binary, on_line)

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def returncode(self) -> int | None:
        return self.process.returncode

    def exited(self) -> asyncio.Future[int]:
        """Resolves with the exit code once the server exited and its leftovers were reaped."""
        return asyncio.shield(self._exit)

    def tree_pids(self) -> list[int]:
        """Pids of the server and its live descendants (safe to call from any thread)."""
        if self._handle is None or self.process.returncode is not None:
            return []
        return [p.pid for p in procs.alive(procs.tree_of(self._handle))]

    def remember_tree(self) -> None:
        """Record the current descendants, so they can still be killed after their parent died
        (call on the loop thread)."""
        if self._handle is None:
            return
        for proc in procs.tree_of(self._handle):
            self._known_tree.setdefault(proc.pid, proc)

    async def terminate(self, grace_s: float) -> int:
        """SIGTERM the server, wait grace_s seconds, then SIGKILL its whole tree; the exit code."""
        self.stop_requested = True
        self.remember_tree()
        if self.process.returncode is None:
            try:
                self.process.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                await asyncio.wait_for(self.exited(), grace_s)
            except TimeoutError:
                self.remember_tree()
                # Children first, so a parent that respawns runners has nothing left to watch.
                tree = sorted(self._known_tree.values(), key=lambda p: p.pid == self.pid)
                await procs.kill_and_wait(procs.alive(tree))
        return await self.exited()

    async def _wait_exit(self) -> int:
        # asyncio's wait() only returns once the pipes close, and an orphaned runner keeps the
        # inherited stdout open; so the exit itself is noticed through returncode.
        pipes_closed = asyncio.ensure_future(self.process.wait())
        while self.process.returncode is None:
            await asyncio.wait({pipes_closed}, timeout=EXIT_POLL_S)
        code = self.process.returncode
        await self._reap_leftovers()
        _done, pending = await asyncio.wait({pipes_closed, *self._readers}, timeout=DRAIN_TIMEOUT_S)
        for task in pending:
            task.cancel()
        return code

    async def _reap_leftovers(self) -> None:
        """Kill runners the server left behind (a crash orphans them); they would hold VRAM."""
        if self._handle is None:
            return
        found = await asyncio.to_thread(procs.group_leftovers, self._handle)  # scans every process
        leftovers = {p.pid: p for p in found}
        for pid, proc in self._known_tree.items():
            if pid != self.pid:
                leftovers.setdefault(pid, proc)
        remaining = procs.alive(leftovers.values())
        if remaining:
            await procs.kill_and_wait(remaining)

    async def _read_lines(self, stream: asyncio.StreamReader | None) -> None:
        if stream is None:
            return
        while True:
            try:
                raw = await stream.readline()
            except (ValueError, asyncio.LimitOverrunError):
                raw = await stream.read(STREAM_LIMIT_BYTES)  # an over-long line arrives in pieces
            if not raw:
                return
            self._on_line(raw.decode("utf-8", errors="replace").rstrip("\r\n"))
