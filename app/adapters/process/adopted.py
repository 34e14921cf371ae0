"""A server an earlier run of the app started and left behind, taken over again: watched and stopped
like a spawned one (SIGTERM, grace period, SIGKILL of its tree), identified by pid and start time.

Its output went to a log file (output_file.py), which is followed again from its last lines. What
cannot be had back: its exit code (only a parent can read that; the server's parent is now init),
and no parent-death signal protects it (it is nobody's child now): the record is kept instead,
rewritten as this run's."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from pathlib import Path

import psutil

from app.adapters.process import attached_log, procs
from app.adapters.process.orphans import Inspection
from app.adapters.process.runtime_record import START_TIME_TOLERANCE_S, RecordBook, ServerRecord, running

EXIT_POLL_S = 0.25


class AdoptedServer:
    """The same surface the supervisor uses of a ManagedServer: pid, binary, stop_requested,
    exited(), tree_pids(), remember_tree() and terminate(); the exit code is None when unknown."""

    def __init__(self, record: ServerRecord, handle: psutil.Process, binary: str, book: RecordBook,
                 on_line: Callable[[str], None]) -> None:
        self.record = record
        self.binary = binary
        self.stop_requested = False
        self.returncode: int | None = None  # never known: only the parent can wait for it
        self._handle = handle
        self._book = book
        self._killed = False
        self._known_tree: dict[int, psutil.Process] = {}
        self.remember_tree()
        loop = asyncio.get_running_loop()
        self._log_task = loop.create_task(attached_log.follow_file(on_line, Path(record.log_path))) if (
            record.log_path) else None
        self._exit = loop.create_task(self._wait_exit())

    @classmethod
    async def adopt(cls, found: Inspection, binary: str, book: RecordBook,
                    on_line: Callable[[str], None]) -> AdoptedServer:
        """Take over an orphan found by orphans.survey; its record now names this app run, and its
        log file (when it has one) is followed into on_line."""
        assert found.server is not None
        record = found.record.adopted_by_this_app()
        await asyncio.to_thread(book.write, record)
        return cls(record, found.server, binary, book, on_line)

    @property
    def pid(self) -> int:
        return self.record.pid

    def exited(self) -> asyncio.Future[int | None]:
        """Resolves once the server is gone and its leftovers were stopped: -SIGKILL when it had
        to be killed, else None (its own exit code cannot be read)."""
        return asyncio.shield(self._exit)

    def tree_pids(self) -> list[int]:
        """Pids of the server and its live descendants (any thread)."""
        if not procs.alive([self._handle]):
            return []
        return [p.pid for p in procs.alive(procs.tree_of(self._handle))]

    def remember_tree(self) -> None:
        """Record the current descendants, so they can still be stopped after the server died."""
        for proc in procs.tree_of(self._handle):
            self._known_tree.setdefault(proc.pid, proc)

    async def terminate(self, grace_s: float) -> int | None:
        """SIGTERM the server, wait grace_s seconds, then SIGKILL its whole tree."""
        self.stop_requested = True
        self.remember_tree()
        # Checked right before signalling: a pid whose start time changed is someone else's now.
        if running(self.record.pid, self.record.create_time) is not None:
            procs.signal_all([self._handle], signal.SIGTERM)
            try:
                await asyncio.wait_for(self.exited(), grace_s)
            except TimeoutError:
                self.remember_tree()
                self._killed = True
                tree = sorted(self._known_tree.values(), key=lambda p: p.pid == self.pid)  # children first
                await procs.kill_and_wait(procs.alive(tree))
        return await self.exited()

    async def _wait_exit(self) -> int | None:
        # Not our child: there is nothing to wait on but the process table.
        while procs.alive([self._handle]):
            await asyncio.sleep(EXIT_POLL_S)
        found = await asyncio.to_thread(
            procs.group_members, self.record.pid, self.record.create_time, START_TIME_TOLERANCE_S)
        leftovers = {p.pid: p for p in found}
        for pid, proc in self._known_tree.items():
            if pid != self.pid:
                leftovers.setdefault(pid, proc)
        remaining = procs.alive(leftovers.values())
        if remaining:
            await procs.kill_and_wait(remaining)
        await asyncio.to_thread(self._book.remove, self.record)
        if self._log_task is not None:
            await asyncio.sleep(attached_log.FILE_POLL_S)  # one more look: its last lines
            self._log_task.cancel()
        return -signal.SIGKILL if self._killed else None


__all__ = ["AdoptedServer"]
