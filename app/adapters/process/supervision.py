"""What every backend's server supervisor does the same way: the lock that orders its coroutines, the
published ServerStatus snapshots, the managed server's kept log, the server's pids, taking back an
orphan an earlier run left behind, the crash watcher and stopping what it started.

A backend's supervisor subclasses SupervisorBase and supplies how to find, identify, start and
watch its own server (_probe_locked, _start_locked) and its words (program, orphan_phrase, …). An
attached server is never signalled: only self._managed, a server this app (or an earlier run of
it) started, is ever stopped. Runs on the app's asyncio loop thread."""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from app.adapters.process import orphans, procs
from app.adapters.process.adopted import AdoptedServer
from app.adapters.process.managed import ManagedServer
from app.adapters.process.runtime_record import RecordBook
from app.adapters.storage import paths as storage_paths
from app.core.server.settings import ServerSettings
from app.core.server.state import ExternalKind, ServerState, ServerStatus

LOG_LINES_KEPT = 500
LOG_LINES_IN_STATUS = 20


def _ignore_status(_status: ServerStatus) -> None:
    return None


def _ignore_log(_line: str) -> None:
    return None


class SupervisorBase:
    """The backend-neutral half of a server supervisor (see the module's docstring)."""

    backend_name = ""  # the registry name written into the records of the servers it starts
    program = "The server"  # how messages name the server: the backend's display name
    orphan_phrase = "A server"  # as in "A server that ollama-deck started earlier … is still running"
    kill_words = "killed it"  # what a SIGKILL after the grace period did

    def __init__(self, settings: ServerSettings, *, on_status: Callable[[ServerStatus], None] = _ignore_status,
                 on_log: Callable[[str], None] = _ignore_log, stop_grace_s: float = 5.0,
                 health_interval_s: float = 1.0, runtime_dir: Path | None = None, die_with_app: bool = True) -> None:
        self.settings = settings
        self._on_status = on_status
        self._on_log = on_log
        self.stop_grace_s = stop_grace_s
        self.health_interval_s = health_interval_s
        self.die_with_app = die_with_app  # off only to test what a platform without it does
        self._status = ServerStatus(ServerState.STOPPED, "Not checked yet.")
        self._log: collections.deque[str] = collections.deque(maxlen=LOG_LINES_KEPT)
        self._managed: ManagedServer | AdoptedServer | None = None
        self._records = RecordBook(runtime_dir or storage_paths.runtime_dir())  # what a later run may find
        self._crash_watcher: asyncio.Task[None] | None = None  # held so the task is not garbage-collected
        self._attached_pid: int | None = None
        self._attached_url: str | None = None
        self._health_task: asyncio.Task[None] | None = None
        self._lock: asyncio.Lock | None = None

    # ----------------------------------------------------------------- what a backend supplies

    async def _probe_locked(self, publish_free: bool = True) -> ServerStatus:
        """Find the program and what answers on host:port (attach, adopt, conflict or free)."""
        raise NotImplementedError

    async def _start_locked(self) -> ServerStatus:
        """Start the backend's own server, or return what the probe found instead."""
        raise NotImplementedError

    def _apply_hint(self, kind: ExternalKind) -> str:
        """How to apply self.settings to a server someone else runs."""
        raise NotImplementedError

    def _crash_reason(self, code: int) -> str:
        """What follows "… without being asked to stop" for a server of ours that exited with code."""
        tail = self._tail()
        return f": {tail[-1]}" if tail else "."

    def _published(self, status: ServerStatus) -> None:
        """Called after each publish (a backend may stop following an attached server's log)."""

    def _closing(self) -> None:
        """Called on close before the server of ours is stopped."""

    # ----------------------------------------------------------------- public API

    @property
    def status(self) -> ServerStatus:
        """The latest published snapshot."""
        return self._status

    @property
    def log_lines(self) -> tuple[str, ...]:
        """The last lines the managed server wrote (stdout and stderr, oldest first)."""
        return tuple(self._log)

    async def probe(self) -> ServerStatus:
        """Find the binary and what answers on host:port; attach to a server of this kind found there."""
        async with self._guard():
            return await self._probe_locked()

    async def start(self) -> ServerStatus:
        """Start our own server (or attach if one already answers); waits until it answers."""
        async with self._guard():
            return await self._start_locked()

    async def stop(self) -> ServerStatus:
        """Stop the server we started (SIGTERM, then kill its tree after the grace period)."""
        async with self._guard():
            return await self._stop_locked()

    async def restart(self, settings: ServerSettings | None = None) -> ServerStatus:
        """Restart our server with new settings; an attached server only gets a fresh apply hint."""
        async with self._guard():
            if settings is not None:
                self.settings = settings
            attached_here = self._attached_url == self.settings.base_url
            if self._status.state is ServerState.RUNNING_ATTACHED and attached_here:
                kind = self._status.external_kind or ExternalKind.OTHER
                return self._publish(self._replace(apply_hint=self._apply_hint(kind)))
            if self._managed is not None:
                await self._stop_locked()
            return await self._start_locked()

    def server_pids(self) -> list[int]:
        """Pids of the server's process tree (ours, or the attached listener's if visible); any thread."""
        if self._managed is not None:
            return self._managed.tree_pids()
        if self._status.state is ServerState.RUNNING_ATTACHED and self._attached_pid is not None:
            try:
                root = psutil.Process(self._attached_pid)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                return []
            return [p.pid for p in procs.alive(procs.tree_of(root))]
        return []

    async def close(self) -> None:
        """Stop watching, and stop the server if it is ours."""
        async with self._guard():
            self._cancel_health()
            self._closing()
            if self._managed is not None:
                await self._stop_locked()

    # ----------------------------------------------------------------- shared internals

    def _guard(self) -> asyncio.Lock:
        # Created lazily so the lock binds to the loop that runs the supervisor.
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    def _publish(self, status: ServerStatus) -> ServerStatus:
        changed = status != self._status
        self._status = status
        self._published(status)
        if changed:
            self._on_status(status)
        return status

    def _replace(self, **changes: Any) -> ServerStatus:
        return dataclasses.replace(self._status, **changes)

    def _tail(self) -> tuple[str, ...]:
        return tuple(self._log)[-LOG_LINES_IN_STATUS:]

    def _on_line(self, line: str) -> None:
        self._log.append(line)
        self._on_log(line)

    def _cancel_health(self) -> None:
        if self._health_task is not None:
            self._health_task.cancel()
            self._health_task = None

    async def _adopt(self, found: orphans.Inspection, version: str | None, binary: str | None) -> ServerStatus:
        """Manage again the server an earlier run started and left behind (its app was killed)."""
        self._log.clear()
        adopted = await AdoptedServer.adopt(found, binary or found.record.cmdline[0], self._records, self._on_line)
        self._managed = adopted
        self._crash_watcher = asyncio.create_task(self._watch_exit(adopted))
        return self._publish(ServerStatus(
            ServerState.RUNNING_MANAGED, orphans.orphan_message(self.orphan_phrase, adopted.record),
            version=version, pid=adopted.pid, binary=adopted.binary, orphan=True,
        ))

    async def _watch_exit(self, managed: ManagedServer | AdoptedServer) -> None:
        """Await the server's exit; an exit nobody asked for is published as CRASHED at once."""
        code = await managed.exited()
        if managed.stop_requested:
            return
        if self._managed is managed:
            self._managed = None
        if code is None:  # adopted: not our child, so neither its exit code nor its output can be read
            how, last = f"(pid {managed.pid}, started by an earlier ollama-deck) stopped", "; it left no log."
        else:
            how = f"was killed by {procs.signal_name(code)}" if code < 0 else f"exited with code {code}"
            last = self._crash_reason(code)
        self._publish(ServerStatus(
            ServerState.CRASHED, f"{self.program} {how} without being asked to stop{last}",
            exit_code=code, last_log_lines=self._tail(), pid=managed.pid, binary=managed.binary,
        ))

    async def _stop_locked(self) -> ServerStatus:
        managed = self._managed
        if managed is None:  # nothing of ours runs; an attached server is never stopped
            return self._status
        self._publish(self._replace(state=ServerState.STOPPING, message="Stopping the server…"))
        started = time.monotonic()
        code = await managed.terminate(self.stop_grace_s)
        self._managed = None
        if code == -signal.SIGKILL:
            how = f"did not stop within {self.stop_grace_s:g} s of SIGTERM, so ollama-deck {self.kill_words}"
        else:
            how = f"stopped in {time.monotonic() - started:.1f} s"
        who = f" an earlier ollama-deck started (pid {managed.pid})" if isinstance(managed, AdoptedServer) else ""
        return self._publish(ServerStatus(
            ServerState.STOPPED, f"The server{who} {how}.", exit_code=code,
            last_log_lines=self._tail(), binary=managed.binary,
        ))


__all__ = ["LOG_LINES_IN_STATUS", "LOG_LINES_KEPT", "SupervisorBase"]
