"""Runs `llama-server` with the chosen settings as flags, or attaches to a llama-server that already
answers (never signalling what it did not start), or takes back one an earlier, killed run started
(adapters/process/orphans.py); publishes its lifecycle as ServerStatus snapshots. Runs on the app's
asyncio loop thread.

Ready means GET /health answers 200. Loading a model takes a while on a CPU, and /health answers
503 "Loading model" meanwhile: that is progress, so the start timeout counts from the spawn and
only the process exiting, or the timeout passing, ends the wait."""

from __future__ import annotations

import asyncio
import os
import shlex
import signal
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from app.adapters.process import orphans
from app.adapters.process import procs as procs
from app.adapters.process.managed import ManagedServer
from app.adapters.process.supervision import SupervisorBase
from app.backends.llama_server import probe as probing
from app.backends.llama_server import tuning
from app.core.server.exposure import exposure_of
from app.core.server.settings import ServerSettings
from app.core.server.state import ExternalKind, ServerState, ServerStatus

POLL_INTERVAL_S = 0.1
PROGRAM = "llama-server"
BACKEND_NAME = tuning.KIND  # in the records of the servers it starts
# What ended a server killed by a signal, and what to do: its log stops where the signal struck, so it does not say.
_SIGNAL_WORDS: dict[int, tuple[str, str]] = {
    signal.SIGKILL: ("SIGKILL comes from outside the server and cannot be caught, so it wrote no reason: the system's "
                     "out-of-memory killer sends it when RAM runs out, or another program (or a person) killed it.",
                     "Look for “Out of memory: Killed process” in the kernel log (journalctl -k, or dmesg); if it "
                     "was that, make the server need less memory (fewer parallel slots, a smaller context or model), "
                     "then start it again from the Server page."),
    signal.SIGILL: ("SIGILL: it ran an instruction this processor does not run, so this llama-server build uses "
                    "features of another CPU (it was built for one), or AMX matrix instructions that this CPU "
                    "advertises but its virtual machine does not run.",
                    "Install or build a llama-server for this machine (built on it, without -march=native, or "
                    "without AMX: the README's “Illegal instruction” line), or choose that program on the Server "
                    "page."),
    signal.SIGSEGV: ("SIGSEGV: it crashed inside itself (a bug in this build, or a model file it misread).",
                     "Try another model file or llama-server version; the lines above show where it was."),
    signal.SIGBUS: ("SIGBUS: a file it had mapped into memory (the model file) was cut or changed on disk while it "
                    "ran.", "Do not rewrite the model file while it is served; start it again from the Server page."),
    signal.SIGABRT: ("SIGABRT: it stopped itself on a failed check; the last lines say which.",
                     "Check the settings and the model file against what those lines name, then start it again."),
    signal.SIGFPE: ("SIGFPE: it crashed on an arithmetic error (a bug in this build, or values it misread).",
                    "Try another model file or llama-server version."),
}
_FROM_OUTSIDE = ("comes from outside the server (another program, a person, or the session it ran in ending).",
                 "Start it again from the Server page.")
KILLED_LINES_QUOTED = 3  # the last log lines quoted for a server killed by a signal
# llama-server reads LLAMA_ARG_* variables for flags it is not given; a shell's exported value must
# not change what the command line shown on the Server page says. LLAMA_API_KEY is --api-key's: the
# app's own requests send no key, so an exported one would lock the dashboard out.
_INHERITED_PREFIX_DROPPED = "LLAMA_ARG_"
_INHERITED_DROPPED = ("LLAMA_API_KEY",)


def _ignore(_value: object) -> None:
    return None


class LlamaServerSupervisor(SupervisorBase):
    """Finds llama-server, attaches to one that answers or manages its own, and watches it."""

    backend_name = BACKEND_NAME
    program = "llama-server"
    orphan_phrase = "A llama-server"

    def __init__(
        self,
        settings: ServerSettings,
        *,
        on_status: Callable[[ServerStatus], None] = _ignore,
        on_log: Callable[[str], None] = _ignore,
        start_timeout_s: float = 120.0,
        stop_grace_s: float = 5.0,
        health_interval_s: float = 1.0,
        runtime_dir: Path | None = None,
        die_with_app: bool = True,
    ) -> None:
        super().__init__(settings, on_status=on_status, on_log=on_log, stop_grace_s=stop_grace_s,
                         health_interval_s=health_interval_s, runtime_dir=runtime_dir, die_with_app=die_with_app)
        self.start_timeout_s = start_timeout_s

    # ----------------------------------------------------------------- what SupervisorBase asks

    def _apply_hint(self, kind: ExternalKind = ExternalKind.OTHER) -> str:
        line = " ".join(shlex.quote(word) for word in tuning.command(self.settings))
        return ("llama-server takes its settings as flags when it starts. Stop that server where it was "
                f"started and start it again with:\n{line}\nor stop it and start the server from ollama-deck.")

    def _crash_reason(self, code: int) -> str:
        if code < 0:
            return self._killed_reason(code)
        if not self._log:
            return "."
        if any("failed to load model" in line for line in self._log):
            return (f": it could not load the model file {tuning.model_path(self.settings)} ({self._reason()}). "
                    "Check that it is a complete GGUF model file (a download may have been cut short), or "
                    "choose another.")
        return f": {self._reason()}"

    def _killed_reason(self, code: int) -> str:
        """For a server ended by a signal: its log stops where the signal struck and does not say why, so the words
        say what the signal means, quote its last lines, and what to do."""
        last = [probing.log_text(line) for line in self._log if line.strip()][-KILLED_LINES_QUOTED:]
        quoted = (" Its last lines: " + " | ".join(f"“{line}”" for line in last) + ".") if last else \
            " It wrote nothing."
        name = procs.signal_name(code)
        cause, todo = _SIGNAL_WORDS.get(-code, (f"{name} {_FROM_OUTSIDE[0]}", _FROM_OUTSIDE[1]))
        return f"; {cause}{quoted} {todo}"

    # ----------------------------------------------------------------- internals: probing

    async def _probe_locked(self, publish_free: bool = True) -> ServerStatus:
        if self._managed is not None:
            return self._status
        self._cancel_health()
        binary, missing_reason = probing.find_binary(tuning.binary(self.settings))
        host, port, base_url = self.settings.host, self.settings.port, self.settings.base_url
        found = await asyncio.to_thread(orphans.survey, self._records, BACKEND_NAME, host, port, self.stop_grace_s)
        if await probing.port_accepts(host, port):
            is_ours, version, model = await probing.identify(base_url)
            if is_ours and found.orphan is not None:
                return await self._adopt(found.orphan, version, binary)
            if is_ours:
                return await self._attach(base_url, version, model, binary)
            listener = await asyncio.to_thread(procs.find_listener, host, port)
            holder = listener.description if listener else "another program"
            return self._publish(ServerStatus(
                ServerState.PORT_CONFLICT,
                f"Port {port} on {host} is taken by {holder}, which is not llama-server. Choose another port "
                "in the server settings, or stop that program yourself; ollama-deck will not touch it.",
                pid=listener.pid if listener else None, binary=binary,
            ))
        if binary is None:
            return self._publish(ServerStatus(ServerState.NOT_INSTALLED, missing_reason))
        free = ServerStatus(
            ServerState.STOPPED, f"No server is running at {base_url}.{orphans.reaped_note(found.reaped)}"
            f"{orphans.elsewhere_note('A llama-server', found.elsewhere)}", binary=binary,
            last_log_lines=self._status.last_log_lines, exit_code=self._status.exit_code,
        )
        return self._publish(free) if publish_free else free

    async def _attach(self, base_url: str, version: str | None, model: str, binary: str | None) -> ServerStatus:
        listener = await asyncio.to_thread(procs.identify_listener, self.settings.host, self.settings.port,
                                           probing.LLAMA_SERVER_PROCESS)
        if listener is not None and listener.pid is not None and \
                not await asyncio.to_thread(procs.runs, listener.pid, probing.LLAMA_SERVER_PROCESS):
            # A proxy (nginx, a balancer) holds the port: its process is not the server, so none is watched as it.
            who = f"the server(s) behind {listener.description}, a proxy"
            listener, behind_proxy = None, True
        else:
            behind_proxy = False
            who = listener.description if listener else "another process"
        self._attached_pid = listener.pid if listener else None
        self._attached_url = base_url
        serving = f", serving {model}" if model else " (still loading its model)"
        status = self._publish(ServerStatus(
            ServerState.RUNNING_ATTACHED,
            f"Attached to llama-server {version or '(unknown build)'} at {base_url}{serving}, run by {who}.",
            version=version, pid=self._attached_pid, external_kind=ExternalKind.OTHER, run_by="another process",
            apply_hint=self._apply_hint(), binary=binary, serving=model,
        ))
        self._health_task = asyncio.get_running_loop().create_task(self._watch_attached(base_url, behind_proxy))
        return status

    async def _watch_attached(self, base_url: str, behind_proxy: bool = False) -> None:
        """Poll /health on the attached server; publish STOPPED once it stops answering as llama-server."""
        failures = 0
        async with httpx.AsyncClient(trust_env=False) as client:
            while failures < 2:
                await asyncio.sleep(self.health_interval_s)
                try:
                    answer = await probing.health(client, base_url)
                    # something else took the port over (a proxy answers ok with its own Server header)
                    failures = 0 if answer.is_llama_server or (behind_proxy and answer.proxied_ok) else 2
                except TimeoutError:
                    failures += 1  # a busy server may be slow once; a refused connection is final
                except (httpx.HTTPError, OSError):
                    failures = 2
        self._health_task = None
        self._attached_pid = None
        self._attached_url = None
        self._publish(ServerStatus(ServerState.STOPPED, f"The llama-server at {base_url} went away "
                                   "(it no longer answers).", binary=self._status.binary))

    # ----------------------------------------------------------------- internals: managing

    def _server_env(self) -> dict[str, str]:
        return {k: v for k, v in os.environ.items()
                if not k.startswith(_INHERITED_PREFIX_DROPPED) and k not in _INHERITED_DROPPED}

    async def _start_locked(self) -> ServerStatus:
        if self._managed is not None:
            return self._status
        probed = await self._probe_locked(publish_free=False)  # STARTING follows at once
        if probed.state in (ServerState.RUNNING_ATTACHED, ServerState.RUNNING_MANAGED, ServerState.PORT_CONFLICT,
                            ServerState.NOT_INSTALLED):
            return probed
        binary = probed.binary
        assert binary is not None
        chosen = tuning.model_path(self.settings)
        problem = tuning.model_file_problem(chosen) if chosen else tuning.MODEL_MISSING
        refusal = exposure_of(self.settings, tuning.LLAMA_SERVER_TUNING).refusal()
        if refusal:  # the form and the CLI refuse first; this stops any other caller
            problem = (f"{refusal} Allow network access on {self.settings.host} in the server settings, "
                       "or use 127.0.0.1.")
        if problem:
            return self._publish(ServerStatus(ServerState.STOPPED, problem, binary=binary))
        self._log.clear()
        try:
            managed = await ManagedServer.spawn(
                binary, self._server_env(), self._on_line, die_with_parent=self.die_with_app, book=self._records,
                endpoint=(BACKEND_NAME, self.settings.host, self.settings.port, self.settings.base_url),
                args=tuning.arguments(self.settings))
        except OSError as exc:
            return self._publish(ServerStatus(
                ServerState.CRASHED, f"Could not run {binary}: {exc.strerror or exc}. {probing.INSTALL_HINT}",
                binary=binary))
        self._managed = managed
        self._crash_watcher = asyncio.create_task(self._watch_exit(managed))
        self._publish(ServerStatus(
            ServerState.STARTING, f"Starting llama-server on {self.settings.bind_address} with {chosen}…",
            pid=managed.pid, binary=binary))
        return await self._wait_until_ready(managed, self.settings.base_url)

    async def _wait_until_ready(self, managed: ManagedServer, base_url: str) -> ServerStatus:
        deadline = time.monotonic() + self.start_timeout_s  # from the spawn: loading is part of starting
        loading_said = False
        async with httpx.AsyncClient(trust_env=False) as client:
            while True:
                if managed.returncode is not None:
                    await managed.exited()
                    await asyncio.sleep(0)  # let the crash watcher publish first
                    return self._status
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return await self._give_up_starting(managed, base_url)
                try:
                    answer = await probing.health(client, base_url, min(probing.PROBE_TIMEOUT_S, remaining))
                    if answer.ready:
                        break
                    if answer.loading and not loading_said:  # progress: say so once, keep waiting
                        loading_said = True
                        self._publish(self._replace(message=(
                            f"llama-server is loading {tuning.model_path(self.settings)} (it answers on "
                            f"{base_url} once the model is in memory)…")))
                except (TimeoutError, httpx.HTTPError, OSError):
                    pass  # not listening yet
                await asyncio.sleep(POLL_INTERVAL_S)
            properties = await probing.props(client, base_url)
        managed.remember_tree()
        managed.output.catch_up()  # the lines it wrote until now, before it is said to be running
        version = probing.version_of(properties)
        model = probing.served_model(properties) or tuning.model_path(self.settings)
        return self._publish(ServerStatus(
            ServerState.RUNNING_MANAGED,
            f"llama-server {version or '(unknown build)'} is running at {base_url}, serving {model} "
            "(started by ollama-deck).", version=version, pid=managed.pid, binary=managed.binary, serving=model))

    def _reason(self) -> str:
        return probing.reason_line(tuple(self._log))

    async def _give_up_starting(self, managed: ManagedServer, base_url: str) -> ServerStatus:
        await managed.terminate(self.stop_grace_s)
        self._managed = None
        last = f" Its last words: {self._reason()}" if self._log else " It wrote nothing."
        return self._publish(ServerStatus(
            ServerState.CRASHED,
            f"llama-server did not become ready at {base_url} within {self.start_timeout_s:g} s (loading "
            f"{tuning.model_path(self.settings)}), so ollama-deck stopped it.{last} Check the log, or raise "
            "the start timeout if the machine is slow.", last_log_lines=self._tail(), binary=managed.binary))

def make_supervisor(settings: ServerSettings, *, on_status: Callable[[ServerStatus], None],
                    on_log: Callable[[str], None], runtime_dir: Path | None = None) -> LlamaServerSupervisor:
    """The ServerFactory of the llama-server backend."""
    return LlamaServerSupervisor(settings, on_status=on_status, on_log=on_log, runtime_dir=runtime_dir)


__all__ = ["BACKEND_NAME", "LlamaServerSupervisor", "make_supervisor"]

