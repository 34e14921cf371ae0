"""The server side of an OpenAI-compatible server: attach only. ollama-deck never starts, stops or restarts it.

Such a server is started and configured on its own machine (`vllm serve`, `python -m sglang.launch_server`,
TGI's launcher, LM Studio), often another one, so there is no process here to own: probing and "starting"
both ask it for its models and, when it answers, attach (RUNNING_ATTACHED, run by "the server's own
start command"); stopping leaves it running; a restart with settings is refused with where those settings
live. While attached, its model list is asked every `watch_interval_s`, and it is said to be gone when it
stops answering.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from pathlib import Path

from app.backends.openai.client import OpenAiClient
from app.backends.openai.endpoint import SESSION
from app.core.errors import ServerError
from app.core.server.settings import ServerSettings
from app.core.server.state import ExternalKind, ServerState, ServerStatus

PROGRAM = "OpenAI-compatible server"
RUN_BY = "its own start command"
SETTINGS_THERE = ("Its settings are the ones it was started with, on its own machine: e.g. `vllm serve MODEL --max-model-len 8192 "
              "--max-num-seqs 4` (vLLM), `--context-length` / `--max-running-requests` (SGLang). Change them there "
              "and restart it yourself.")
APPLY_HINT = f"ollama-deck attaches to an OpenAI-compatible server and does not start it. {SETTINGS_THERE}"
NO_START = ("ollama-deck does not start OpenAI-compatible servers: start it on its machine (e.g. `vllm serve MODEL`) "
            "and give its address with --url.")


class AttachedServer:
    """A ServerControl that only attaches (see the module docstring); `base_url` overrides the settings' address
    (a URL with https or a path prefix, which the settings' host and port cannot hold)."""

    program = PROGRAM

    def __init__(self, settings: ServerSettings, *, on_status: Callable[[ServerStatus], None],
                 on_log: Callable[[str], None], runtime_dir: Path | None = None,
                 client: Callable[[str], OpenAiClient] = OpenAiClient, watch_interval_s: float = 5.0) -> None:
        self.settings = settings
        self._on_status = on_status
        self._on_log = on_log
        self._client = client
        self.watch_interval_s = watch_interval_s
        self._status = ServerStatus(ServerState.STOPPED, "Not checked yet.")
        self._watch: asyncio.Task[None] | None = None

    @property
    def status(self) -> ServerStatus:
        """The latest state, as last published."""
        return self._status

    @property
    def base_url(self) -> str:
        """Where the server is."""
        return SESSION.resolve(self.settings.base_url)

    def _publish(self, status: ServerStatus) -> ServerStatus:
        self._status = status
        self._on_status(status)
        return status

    async def _ask(self) -> tuple[str | None, str]:
        """(version or None when it does not answer, what went wrong)."""
        try:
            async with self._client(self.base_url) as client:
                return await client.version(), ""
        except ServerError as exc:  # a wrong key too: its hint says how to give one
            return None, exc.user_text()

    async def probe(self) -> ServerStatus:
        """Ask the server for its models: attached when it answers, STOPPED with why when it does not."""
        version, problem = await self._ask()
        if version is None:
            self._stop_watch()
            return self._publish(ServerStatus(ServerState.STOPPED, f"No OpenAI-compatible server answers at "
                                              f"{self.base_url}: {problem}", apply_hint=APPLY_HINT))
        shown = "" if version == "unknown" else f" {version}"
        status = self._publish(ServerStatus(
            ServerState.RUNNING_ATTACHED, f"Attached to the OpenAI-compatible server{shown} at {self.base_url}, "
            f"run by {RUN_BY}.", version=None if version == "unknown" else version,
            external_kind=ExternalKind.OTHER, run_by=RUN_BY, apply_hint=APPLY_HINT))
        if self._watch is None:
            self._watch = asyncio.get_running_loop().create_task(self._watching())
        return status

    async def start(self) -> ServerStatus:
        """Attach when the server answers; nothing is started (NO_START says so when it does not)."""
        status = await self.probe()
        if status.state is ServerState.RUNNING_ATTACHED:
            return status
        return self._publish(ServerStatus(ServerState.STOPPED, f"{status.message} {NO_START}",
                                          apply_hint=APPLY_HINT))

    async def stop(self) -> ServerStatus:
        """Nothing is stopped: the server is not ollama-deck's."""
        return self._status

    async def restart(self, settings: ServerSettings | None = None) -> ServerStatus:
        """Refused: the server's settings are its own start command's (APPLY_HINT says where)."""
        if settings is not None:
            self.settings = settings
        self._on_log(f"not restarted: {APPLY_HINT}")
        return self._status

    def server_pids(self) -> Sequence[int]:
        """None: the server's processes are not ollama-deck's to find (it may run on another machine)."""
        return ()

    async def close(self) -> None:
        """Stop watching (the server keeps running)."""
        self._stop_watch()
        if self._watch_done is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch_done

    _watch_done: asyncio.Task[None] | None = None

    def _stop_watch(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch_done, self._watch = self._watch, None

    async def _watching(self) -> None:
        while True:
            await asyncio.sleep(self.watch_interval_s)
            version, problem = await self._ask()
            if version is None:
                self._watch = None
                self._publish(ServerStatus(ServerState.STOPPED, f"The OpenAI-compatible server at {self.base_url} "
                                           f"went away: {problem}", apply_hint=APPLY_HINT))
                return


def make_attached(settings: ServerSettings, *, on_status: Callable[[ServerStatus], None],
                  on_log: Callable[[str], None], runtime_dir: Path | None = None) -> AttachedServer:
    """The ServerFactory of the openai backend."""
    return AttachedServer(settings, on_status=on_status, on_log=on_log, runtime_dir=runtime_dir)


__all__ = ["APPLY_HINT", "AttachedServer", "NO_START", "SETTINGS_THERE", "make_attached"]
