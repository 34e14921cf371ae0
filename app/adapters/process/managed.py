"""One server process that ollama-deck spawned (`ollama serve`, `llama-server -m …`): its output
lines (through a file, see output_file.py), its exit, and stopping its whole process tree (SIGTERM,
grace period, then SIGKILL of every descendant).

It should not outlive the app. On Linux the child asks the kernel for SIGTERM when its parent dies
(prctl PR_SET_PDEATHSIG, armed in preexec_fn). Four details matter:
- "parent" is the thread that forked: asyncio runs Popen on the loop thread, which lives as long as
  the app (the GUI's LoopThread, the CLI's asyncio.run in the main thread); stopping that loop
  thread therefore also stops the server;
- subprocess runs setsid (start_new_session) before preexec_fn, and the setting survives setsid and
  exec (it is cleared only by a set-user-ID exec), so the server is its own session's leader and
  still gets the signal;
- preexec_fn runs in the forked child of a threaded app, where a lock another thread held at the
  fork stays locked: the hook calls only prctl, resolved before the fork, and getppid;
- it is not inherited: the server's runners get nothing when the app dies. A SIGTERMed `ollama
  serve` stops its runners itself; a SIGKILLed one leaves them, still in its process group, which
  the next start finds through the server's record (adapters/process/orphans.py).
Elsewhere (macOS, Windows) nothing is armed, and the record alone lets the next start find the
server. A record is written right after the spawn and removed once the server and its leftovers
are gone (adapters/process/runtime_record.py)."""

from __future__ import annotations

import asyncio
import ctypes
import os
import signal
import sys
from collections.abc import Callable, Mapping, Sequence

import psutil

from app.adapters.process import procs as procs
from app.adapters.process.output_file import OutputReader, open_for_server
from app.adapters.process.runtime_record import RecordBook, ServerRecord, record_for

DRAIN_TIMEOUT_S = 1.0
PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _load_prctl() -> Callable[..., int] | None:
    """libc's prctl, resolved before any fork (the forked child must not load libraries)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    return prctl


_PRCTL = _load_prctl()


def parent_death_hook() -> Callable[[], None] | None:
    """A preexec_fn that has the child get SIGTERM when the spawning thread ends; None where the
    platform has no such thing. It does as little as possible: it runs between fork and exec."""
    prctl = _PRCTL
    if prctl is None:
        return None
    parent = os.getpid()

    def arm() -> None:
        if prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0) != 0:
            return  # unarmed: the record still lets the next start find the server
        if os.getppid() != parent:  # the app died between fork and prctl: the signal will not come
            os._exit(1)

    return arm


class ManagedServer:
    """A spawned server in its own session, so its pid is the process group of its runners."""

    def __init__(self, process: asyncio.subprocess.Process, binary: str, output: OutputReader,
                 book: RecordBook | None = None, record: ServerRecord | None = None) -> None:
        self.process = process
        self.binary = binary
        self.stop_requested = False
        self.record = record  # what the next start would find if this app died now
        self.output = output
        self._book = book
        try:
            self._handle: psutil.Process | None = psutil.Process(process.pid)
        except psutil.NoSuchProcess:
            self._handle = None
        self._known_tree: dict[int, psutil.Process] = {}
        self._exit = asyncio.create_task(self._wait_exit())

    @classmethod
    async def spawn(cls, binary: str, env: Mapping[str, str], on_line: Callable[[str], None], *,
                    die_with_parent: bool = True, book: RecordBook | None = None,
                    endpoint: tuple[str, str, int, str] | None = None,
                    args: Sequence[str] = ("serve",)) -> ManagedServer:
        """Run `binary *args` (by default `binary serve`) with exactly env; raises OSError when it
        cannot be executed.

        die_with_parent arms the parent-death signal where the platform has one; with a book and an
        endpoint (backend name, host, port, base URL) the server's record is written before this
        returns, and its output goes to a log file beside the record (else to a temporary file)."""
        named = book.folder / f"server-{endpoint[0]}-{endpoint[2]}.log" if book and endpoint else None
        fd, log_path, temporary = await asyncio.to_thread(open_for_server, named)
        try:
            process = await asyncio.create_subprocess_exec(
                binary, *args,
                env=dict(env),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=fd,
                stderr=fd,
                start_new_session=True,
                preexec_fn=parent_death_hook() if die_with_parent else None,
            )
        except OSError:
            if temporary:
                log_path.unlink(missing_ok=True)
            raise
        finally:
            os.close(fd)  # the server holds its own copy
        output = OutputReader(log_path, on_line, delete_after=temporary)
        record = None
        if book is not None and endpoint is not None:
            backend, host, port, base_url = endpoint
            try:  # Popen returned after exec, so this reads the server's own command line
                record = record_for(backend, process.pid, host, port, base_url,
                                    dies_with_app=die_with_parent and _PRCTL is not None,
                                    log_path=None if temporary else str(log_path))
            except psutil.Error:
                record = None  # already gone: nothing to find later
            if record is not None and not await asyncio.to_thread(book.write, record):
                record = None
        return cls(process, binary, output, book, record)

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
        code = await self.process.wait()
        await self._reap_leftovers()
        if self._book is not None and self.record is not None:
            await asyncio.to_thread(self._book.remove, self.record)  # nothing of it is left to find
        await self.output.finish(DRAIN_TIMEOUT_S)  # its last lines, the crash's reason among them
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
