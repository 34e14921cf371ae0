"""Ollama's server telemetry: the live slots of the llama-server it runs as its child (Ollama 0.30
and later), found through Ollama's log (child.py) or, for an attached server, its processes
(child_processes.py), and read from that child's own `GET /slots`.

Ollama itself reports no slots, and it starts its llama-server without --metrics, so there are no
server-wide counters or queue length: slots only, and every sample says so. Each sample names the
child it came from and carries its command line as logged. When the child stops answering (an
unload, a crash) the reader says so and stops asking it until the log names the next one."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

import httpx

from app.adapters.http import llama_slots
from app.backends.ollama.child import CHILDREN, ChildState, ChildWatch, ChildWatches, runs_llama_server
from app.core.server_telemetry import RateTracker, ServerReading, ServerSample

NO_METRICS = ("Ollama starts its llama-server without --metrics, so only the child's slots are read: no "
              "server-wide token counters and no queue length (compare busy slots with the requests in flight)")


def no_log_reason(base_url: str) -> str:
    """Why no child is known when neither the server's log nor its processes can be read."""
    return (f"no llama-server of the Ollama at {base_url} is known: slots are shown only for an Ollama whose log "
            "ollama-deck reads (one it started, or a systemd service or desktop app whose log it can read) or "
            "whose processes it can see on this machine, because only they name the llama-server's port")


def waiting_reason(base_url: str, state: ChildState) -> str:
    """Why no child is known although the server's log is read."""
    if state.version and runs_llama_server(state.version) is False:
        return (f"Ollama {state.version} at {base_url} runs models in its own runner, which reports no slots; "
                "live slots need Ollama 0.30 or later (it runs llama-server as its child)")
    if not state.server_lines:  # only its processes are seen
        return (f"Ollama at {base_url} runs no llama-server now (none among its processes): no model is loaded, "
                "or this Ollama is older than 0.30; slots show once it loads a model — send a prompt")
    return (f"Ollama at {base_url} has not started a llama-server in the {state.server_lines} log lines read so far "
            "(no model loaded since): slots show once it loads a model — send a prompt, or load one on the "
            "Models page")


def source_text(state: ChildState, base_url: str) -> str:
    """Which child the slots come from, for the Slots tab."""
    command = state.command
    if command is None:
        return f"Ollama at {base_url}: no llama-server child known"
    where = f"{command.host}:{command.port}" + (f", pid {state.pid}" if state.pid else "")
    if state.gone:
        return f"Ollama's last llama-server ({where}) has exited · {command.summary()}"
    loaded = f" · loaded in {state.load_s:.2f} s" if state.load_s is not None else " · loading"
    return f"Ollama's llama-server at {where} · {command.summary()}{loaded}"


class OllamaChildTelemetry:
    """Polls the /slots of the llama-server that the Ollama at base_url runs now."""

    def __init__(self, base_url: str, *, children: ChildWatches = CHILDREN,
                 transport: httpx.AsyncBaseTransport | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.base_url = base_url.rstrip("/")
        self._watch: ChildWatch = children.watch(self.base_url)
        self._transport = transport
        self._clock = clock
        self._http: httpx.AsyncClient | None = None
        self._generation: int | None = None  # the child the client and the rates belong to
        self._answered = False  # that child answered /slots at least once
        self._rates = RateTracker()

    async def _client_for(self, state: ChildState) -> httpx.AsyncClient:
        if self._generation != state.generation:
            await self.aclose()  # a new child: new port, new slots, counters from zero
            self._generation = state.generation
            self._answered = False
            self._rates.reset()
        if self._http is None:
            assert state.command is not None
            self._http = llama_slots.local_client(state.command.base_url, self._transport)
        return self._http

    def _without_slots(self, state: ChildState, reason: str) -> ServerSample:
        reading = ServerReading(at=self._clock(), slots=None, slots_reason=reason, metrics_reason=NO_METRICS)
        return replace(self._rates.sample(reading), source=source_text(state, self.base_url),
                       server_command=state.command.text if state.command else "")

    async def sample(self) -> ServerSample:
        """The child's slots now, or a sample without slots that says why there are none."""
        state = self._watch.state
        if state.command is None:
            known = state.server_lines or state.scanned
            reason = waiting_reason(self.base_url, state) if known else no_log_reason(self.base_url)
            return self._without_slots(state, reason)
        if state.gone:
            return self._without_slots(state, state.gone)  # not asked again until the log names a new child
        command = state.command
        client = await self._client_for(state)
        try:
            response = await client.get("/slots")
        except httpx.ConnectError as exc:
            if self._answered or state.load_s is not None:
                gone = (f"llama-server on port {command.port} no longer answers ({type(exc).__name__}): Ollama "
                        "unloaded the model (keep-alive ran out, keep_alive 0, or another model took its place) or "
                        "the child exited; its slots show again when Ollama next loads a model")
                self._watch.mark_gone(state.generation, gone)
                await self.aclose()
                return self._without_slots(self._watch.state, gone)
            return self._without_slots(state, f"llama-server on port {command.port} does not answer yet: Ollama "
                                       "is loading the model")
        except httpx.HTTPError as exc:
            return self._without_slots(state, f"/slots at {command.base_url} did not answer "
                                       f"({type(exc).__name__}: {exc or 'no detail'})")
        text = response.text[:llama_slots.MAX_BODY_CHARS]
        if response.status_code != 200:
            why = llama_slots.error_text(response.status_code, text)
            return self._without_slots(state, f"/slots at {command.base_url}: {why}")
        slots, skipped, why = llama_slots.slots_from_text(text, command.base_url)
        self._answered = True
        reading = ServerReading(at=self._clock(), slots=slots, slots_reason=why, metrics_reason=NO_METRICS,
                                skipped_lines=skipped)
        return replace(self._rates.sample(reading), source=source_text(state, self.base_url),
                       server_command=command.text)

    async def aclose(self) -> None:
        """Close the pooled connection to the child."""
        if self._http is not None:
            await self._http.aclose()
            self._http = None


def server_telemetry(base_url: str) -> OllamaChildTelemetry:
    """The ServerTelemetryFactory of Ollama: the slots of its llama-server child."""
    return OllamaChildTelemetry(base_url)


__all__ = ["NO_METRICS", "OllamaChildTelemetry", "no_log_reason", "server_telemetry", "source_text",
           "waiting_reason"]
