"""Runs `ollama serve` with the chosen settings, or attaches to an Ollama that is already running
(or takes back one that an earlier, killed run started: adapters/process/orphans.py), and
publishes its lifecycle as ServerStatus snapshots. Runs on the app's asyncio loop thread."""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from app.adapters.process import attached_log, orphans
from app.backends.ollama import probe as probing
from app.backends.ollama import tuning
from app.adapters.process import procs as procs
from app.adapters.process.managed import ManagedServer
from app.adapters.process.supervision import SupervisorBase
from app.backends.ollama.child import CHILDREN, ChildWatches
from app.backends.ollama.child_processes import follow_child_processes
from app.backends.ollama.client import OLLAMA_BANNER, OllamaClient
from app.core.errors import ServerError
from app.core.server.exposure import exposure_of
from app.backends.ollama.attached import RUN_BY, apply_hint_for
from app.core.server.state import ExternalKind, ServerState, ServerStatus
from app.core.server.settings import ServerSettings

POLL_INTERVAL_S = 0.1
PROBE_TIMEOUT_S = probing.PROBE_TIMEOUT_S
BACKEND_NAME = "ollama"  # in the records of the servers it starts

# Tuning knobs a shell may have exported; the server must get exactly what the settings say,
# so an inherited value must not silently replace "Ollama's default". OLLAMA_MODELS is kept:
# dropping it would hide the user's models.
_INHERITED_KNOBS_DROPPED = (
    "OLLAMA_NUM_PARALLEL", "OLLAMA_CONTEXT_LENGTH", "OLLAMA_KV_CACHE_TYPE", "OLLAMA_FLASH_ATTENTION",
    "OLLAMA_KEEP_ALIVE", "OLLAMA_MAX_LOADED_MODELS", "OLLAMA_MAX_QUEUE", "OLLAMA_GPU_OVERHEAD",
)

# Variables that decide who may call the server: only the settings decide them, where the exposure
# check sees them (OLLAMA_HOST is the form's host and port; OLLAMA_ORIGINS comes only from the extra
# environment). An exported OLLAMA_ORIGINS=* would otherwise let any web page use the server unchecked.
_INHERITED_EXPOSURE_DROPPED = ("OLLAMA_HOST", "OLLAMA_ORIGINS")


def passed_over(inherited: dict[str, str], passed: dict[str, str]) -> list[str]:
    """NAME=value of each inherited variable that decides who may call the server and that the server
    does not get as it was (it gets the settings' value, or none)."""
    return [f"{name}={inherited[name]}" for name in _INHERITED_EXPOSURE_DROPPED
            if name in inherited and passed.get(name) != inherited[name]]


_NO_SERVER = (ServerState.STOPPED, ServerState.CRASHED, ServerState.PORT_CONFLICT, ServerState.NOT_INSTALLED)


def _ignore_status(_status: ServerStatus) -> None:
    return None


def _ignore_log(_line: str) -> None:
    return None


class ServerSupervisor(SupervisorBase):
    """Finds `ollama`, attaches to a running server or manages its own, and watches it."""

    backend_name = BACKEND_NAME
    program = "Ollama"
    orphan_phrase = "An `ollama serve`"
    kill_words = "killed it and its runners"

    def __init__(
        self,
        settings: ServerSettings,
        *,
        on_status: Callable[[ServerStatus], None] = _ignore_status,
        on_log: Callable[[str], None] = _ignore_log,
        start_timeout_s: float = 30.0,
        stop_grace_s: float = 5.0,
        which: Callable[[str], str | None] = shutil.which,
        client_factory: Callable[[str], OllamaClient] = OllamaClient,
        health_interval_s: float = 1.0,
        log_follower_for: Callable[[ExternalKind], attached_log.Follower | None] = attached_log.follower_for,
        runtime_dir: Path | None = None,
        die_with_app: bool = True,
        children: ChildWatches = CHILDREN,
    ) -> None:
        # Every line of the server's log also goes to the watch of its llama-server child, which the
        # slot reader of the same address asks for the child's port (child.py).
        self._children = children
        super().__init__(settings, on_status=on_status, on_log=self._feeding_children(on_log),
                         stop_grace_s=stop_grace_s,
                         health_interval_s=health_interval_s, runtime_dir=runtime_dir, die_with_app=die_with_app)
        self.start_timeout_s = start_timeout_s
        self._which = which
        self._client_factory = client_factory
        self._log_follower_for = log_follower_for
        self._follow_task: asyncio.Task[None] | None = None  # the attached server's own log, where it can be read
        self._follow_key: tuple[int | None, ExternalKind] | None = None
        self._scan_task: asyncio.Task[None] | None = None  # its llama-server child, found in the process table

    # ----------------------------------------------------------------- what SupervisorBase asks

    def _apply_hint(self, kind: ExternalKind) -> str:
        return apply_hint_for(kind, tuning.environment(self.settings))

    def _crash_reason(self, code: int) -> str:
        tail = self._tail()
        return f": {probing.reason_line(tail)}" if tail else "."

    def _published(self, status: ServerStatus) -> None:
        if status.state is not ServerState.RUNNING_ATTACHED:
            self._stop_following()
        if status.state in _NO_SERVER:  # its child went with it; the next server's log starts afresh
            self._children.watch(self.settings.base_url).reset()

    def _feeding_children(self, on_log: Callable[[str], None]) -> Callable[[str], None]:
        def read(line: str) -> None:
            self._children.watch(self.settings.base_url).feed(line)
            on_log(line)

        return read

    def _closing(self) -> None:
        self._stop_following()

    # ----------------------------------------------------------------- internals: probing

    async def _probe_locked(self, publish_free: bool = True) -> ServerStatus:
        if self._managed is not None:
            return self._status
        self._cancel_health()
        binary, missing_reason = probing.find_binary(tuning.binary(self.settings), self._which)
        base_url = self.settings.base_url
        found = await asyncio.to_thread(orphans.survey, self._records, BACKEND_NAME, self.settings.host,
                                        self.settings.port, self.stop_grace_s)
        if await probing.port_accepts(base_url):
            is_ollama, version = await probing.identify(self._client_factory(base_url))
            if is_ollama and found.orphan is not None:
                return await self._adopt(found.orphan, version, binary)
            if is_ollama:
                return await self._attach(base_url, version, binary)
            listener = await asyncio.to_thread(procs.find_listener, self.settings.host, self.settings.port)
            holder = listener.description if listener else "another program"
            return self._publish(ServerStatus(
                ServerState.PORT_CONFLICT,
                f"Port {self.settings.port} on {self.settings.host} is taken by {holder}, which is not "
                "Ollama. Choose another port in the server settings, or stop that program yourself; "
                "ollama-deck will not touch it.",
                pid=listener.pid if listener else None,
                binary=binary,
            ))
        if binary is None:
            return self._publish(ServerStatus(ServerState.NOT_INSTALLED, missing_reason))
        free = ServerStatus(
            ServerState.STOPPED, f"No server is running at {base_url}.{orphans.reaped_note(found.reaped)}"
            f"{orphans.elsewhere_note('An `ollama serve`', found.elsewhere)}", binary=binary,
            last_log_lines=self._status.last_log_lines, exit_code=self._status.exit_code,
        )
        return self._publish(free) if publish_free else free

    async def _attach(self, base_url: str, version: str | None, binary: str | None) -> ServerStatus:
        # Scanning sockets and /proc takes a while on a busy machine; keep the loop free.
        listener = await asyncio.to_thread(procs.identify_listener, self.settings.host, self.settings.port,
                                           probing.OLLAMA_PROCESS)
        pid = listener.pid if listener else None
        kind = await asyncio.to_thread(procs.external_kind_of, pid, probing.OLLAMA_PROCESS)
        self._attached_pid = pid
        self._attached_url = base_url
        who = RUN_BY[kind] if kind is not ExternalKind.OTHER else (
            listener.description if listener else "another process"
        )
        status = self._publish(ServerStatus(
            ServerState.RUNNING_ATTACHED,
            f"Attached to Ollama {version or '(unknown version)'} at {base_url}, run by {who}.",
            version=version, pid=pid, external_kind=kind, run_by=RUN_BY[kind],
            apply_hint=apply_hint_for(kind, tuning.environment(self.settings)), binary=binary,
        ))
        self._health_task = asyncio.get_running_loop().create_task(self._watch_attached(base_url))
        self._follow_attached_log(pid, kind)
        return status

    def _follow_attached_log(self, pid: int | None, kind: ExternalKind) -> None:
        """Follow the attached server's own log (journal or desktop-app file) into on_log; a probe
        that finds the same server again keeps the follower it has."""
        running = any(task is not None and not task.done() for task in (self._follow_task, self._scan_task))
        if running and self._follow_key == (pid, kind):
            return
        self._stop_following()
        watch = self._children.watch(self.settings.base_url)
        watch.reset()  # another server: what was seen of a child is not its
        self._follow_key = (pid, kind)
        loop = asyncio.get_running_loop()
        # Its child's command line is readable even where its log is not. The app's own process is no
        # Ollama (a server answering from inside it is a stand-in): its children are not Ollama's.
        if pid is not None and pid != os.getpid():
            self._scan_task = loop.create_task(follow_child_processes(pid, watch))
        follower = self._log_follower_for(kind)
        if follower is None:
            return
        self._follow_task = loop.create_task(follower(self._on_log))

    def _stop_following(self) -> None:
        for task in (self._follow_task, self._scan_task):
            if task is not None:
                task.cancel()
        self._follow_task = self._scan_task = None
        self._follow_key = None

    async def _watch_attached(self, base_url: str) -> None:
        """Poll GET / on the attached server; publish STOPPED once it stops answering."""
        client = self._client_factory(base_url)
        failures = 0
        try:
            while True:
                await asyncio.sleep(self.health_interval_s)
                try:
                    if OLLAMA_BANNER in await asyncio.wait_for(client.root_text(), PROBE_TIMEOUT_S):
                        failures = 0
                        continue
                    failures = 2  # something else took the port over
                except TimeoutError:
                    failures += 1  # a busy server may be slow once; a refused connection is final
                except (ServerError, OSError):
                    failures = 2
                if failures >= 2:
                    break
        finally:
            await client.aclose()
        self._health_task = None
        self._attached_pid = None
        self._attached_url = None
        self._publish(ServerStatus(
            ServerState.STOPPED,
            f"The server at {base_url} went away (it no longer answers).",
            binary=self._status.binary,
        ))

    # ----------------------------------------------------------------- internals: managing

    def _server_env(self) -> dict[str, str]:
        dropped = _INHERITED_KNOBS_DROPPED + _INHERITED_EXPOSURE_DROPPED
        env = {k: v for k, v in os.environ.items() if k not in dropped}
        env.update(tuning.environment(self.settings))
        return env

    def _passed_over_note(self, env: dict[str, str]) -> str:
        """What the running message says about inherited variables the server was not given ('' if none)."""
        left = passed_over(dict(os.environ), env)
        if not left:
            return ""
        return (f" Not passed on from the environment ollama-deck was started with: {', '.join(left)}; who may "
                "call the server is set in the server settings (host, port and the extra environment, where "
                "OLLAMA_ORIGINS is checked).")

    async def _start_locked(self) -> ServerStatus:
        if self._managed is not None:
            return self._status
        probed = await self._probe_locked(publish_free=False)  # STARTING follows at once
        if probed.state in (ServerState.RUNNING_ATTACHED, ServerState.RUNNING_MANAGED, ServerState.PORT_CONFLICT,
                            ServerState.NOT_INSTALLED):  # managed: an orphan it adopted
            return probed
        binary = probed.binary
        assert binary is not None
        refusal = exposure_of(self.settings, tuning.OLLAMA_TUNING).refusal()
        if refusal:  # the form and the CLI refuse first; this stops any other caller
            return self._publish(ServerStatus(ServerState.STOPPED, f"{refusal} Allow network access on "
                                 f"{self.settings.host} in the server settings, or use 127.0.0.1.", binary=binary))
        self._log.clear()
        env = self._server_env()
        try:
            managed = await ManagedServer.spawn(
                binary, env, self._on_line, die_with_parent=self.die_with_app, book=self._records,
                endpoint=(BACKEND_NAME, self.settings.host, self.settings.port, self.settings.base_url))
        except OSError as exc:
            return self._publish(ServerStatus(
                ServerState.CRASHED, f"Could not run {binary}: {exc.strerror or exc}. {probing.INSTALL_HINT}",
                binary=binary,
            ))
        self._managed = managed
        self._crash_watcher = asyncio.create_task(self._watch_exit(managed))
        self._publish(ServerStatus(
            ServerState.STARTING, f"Starting `ollama serve` on {self.settings.bind_address}…",
            pid=managed.pid, binary=binary,
        ))
        return await self._wait_until_ready(managed, self.settings.base_url, self._passed_over_note(env))

    async def _wait_until_ready(self, managed: ManagedServer, base_url: str, note: str = "") -> ServerStatus:
        deadline = time.monotonic() + self.start_timeout_s
        client = self._client_factory(base_url)
        try:
            while True:
                if managed.returncode is not None:
                    await managed.exited()
                    await asyncio.sleep(0)  # let the crash watcher publish first
                    return self._status
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return await self._give_up_starting(managed, base_url)
                try:
                    if await asyncio.wait_for(client.is_ollama(), min(PROBE_TIMEOUT_S, remaining)):
                        break
                except (TimeoutError, ServerError, OSError):
                    pass
                await asyncio.sleep(POLL_INTERVAL_S)
            try:
                version = probing.version_text(await asyncio.wait_for(client.version(), PROBE_TIMEOUT_S))
            except (TimeoutError, ServerError, OSError):
                version = None
        finally:
            await client.aclose()
        managed.remember_tree()
        managed.output.catch_up()  # the lines it wrote until now, before it is said to be running
        return self._publish(ServerStatus(
            ServerState.RUNNING_MANAGED,
            f"Ollama {version or '(unknown version)'} is running at {base_url} (started by ollama-deck).{note}",
            version=version, pid=managed.pid, binary=managed.binary,
        ))

    async def _give_up_starting(self, managed: ManagedServer, base_url: str) -> ServerStatus:
        await managed.terminate(self.stop_grace_s)
        self._managed = None
        tail = self._tail()
        last = f" Its last words: {probing.reason_line(tail)}" if tail else " It wrote nothing."
        return self._publish(ServerStatus(
            ServerState.CRASHED,
            f"Ollama did not answer at {base_url} within {self.start_timeout_s:g} s, so "
            f"ollama-deck stopped it.{last} Check the log, or raise the start timeout if the "
            "machine is slow.",
            last_log_lines=tail, binary=managed.binary,
        ))
