"""The demo director: runs a demo script's steps against the app's server, one key press per step.

Each step does what a page would do by hand — a prompt or a burst through the prompt console's view-model
(its own ConsoleSession: the loop thread streams, the GUI drains at paint rate, the token meter counts), a
guarded apply of parallel through the server's view-model, a thinking A/B, a sweep through the Benchmark page
or the newest kept run of the model — and ends with a StepResult: DONE with a headline in numbers, FAILED with
its kind and one line saying why, or STOPPED (Esc, a reset, its time limit). A failed step never stops the
script. Nothing here waits on the GUI thread: work runs on the loop thread and comes back as signals.
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from PySide6.QtCore import QObject, Qt, QTimer, Signal, SignalInstance

from app.core.bench.outcome import RunStatus
from app.core.bench.run import SweepRun
from app.core.bench.run_summary import RunSummary
from app.core.bench.sweep import SweepAxes, SweepPlanError, SweepSpec
from app.core.bench.workload import LoadPlan
from app.core.console.presets import builtin
from app.core.console.reply_stats import ReplyStats, summarize_burst, thinking_cost
from app.core.demo.headlines import (ab_headline, burst_figures, burst_headline, first_sentence, live_requests,
                                     median_rate, parallel_headline, parallel_key, short_reason, sweep_figures,
                                     sweep_headline)
from app.core.demo.live import IDLE, LiveRequests
from app.core.demo.script import DemoScript, DemoStep, StepAction, StepFailure, StepResult, StepState
from app.core.errors import DeckError
from app.core.models import LocalModel, ModelDetails, RunningModel
from app.core.server.settings import ServerSettings
from app.core.server.state import ServerState, ServerStatus
from app.services.guarded_apply import ApplyReport
from app.services.prompts import MAX_BURST, PromptOptions, PromptRequest, ReplyOutcome
from app.ui.pages.bench.page import PHASE_WORDS, BenchPage
from app.ui.pages.bench.worker import Background, SweepProgress
from app.ui.pages.context import PageContext
from app.ui.pages.prompt.session import ConsoleRun, ConsoleSession, Drained

LIVE_INTERVAL_MS = 100  # live figures at most ten times a second


@dataclass(eq=False)
class _Batch:
    """The replies of one send: one or more console runs (a burst over MAX_BURST is sent as several)."""

    runs: list[ConsoleRun]
    requested: int
    started_s: float
    live: dict[tuple[int, int], ReplyStats] = field(default_factory=dict)  # (run number, reply) -> figures
    outcomes: dict[tuple[int, int], ReplyOutcome] = field(default_factory=dict)
    ended: set[int] = field(default_factory=set)  # run numbers finished

    @property
    def over(self) -> bool:
        return len(self.ended) == len(self.runs)

    def live_figures(self, sent: int, done_before: int) -> LiveRequests:
        streaming = [s for key, s in self.live.items() if key not in self.outcomes]
        finished = [o.stats for o in self.outcomes.values() if o.error is None and not o.stopped]
        return live_requests(streaming, finished, sent=sent, done=done_before + len(self.outcomes),
                             in_flight=max(0, self.requested - len(self.outcomes)),
                             elapsed_s=time.monotonic() - self.started_s)


@dataclass(eq=False)
class _Running:
    """The step being run and what it has in flight."""

    token: int
    index: int
    step: DemoStep
    url: str
    request: PromptRequest | None = None
    model: str = ""
    details: ModelDetails | None = None
    waiting: str = ""  # "models", "details", "apply", "send", "history", "sweep"
    batch: _Batch | None = None
    sent: int = 0
    done: int = 0  # replies over in earlier batches of the step
    values: list[int] = field(default_factory=list)  # PARALLEL: the values still to apply
    value: int | None = None  # PARALLEL: the value now applied
    rates: list[tuple[int, float | None]] = field(default_factory=list)
    figures: dict[str, float] = field(default_factory=dict)


class DemoDirector(QObject):
    """Runs a script's steps one by one (advance), stops what is in flight (stop_all) and starts over with the
    settings in force when it was made (reset)."""

    step_changed = Signal(int, object, object)  # index, StepState, StepResult | None
    live_changed = Signal(object)  # LiveRequests (at most ~10 per second)
    notice = Signal(str)  # one line for the presenter
    script_finished = Signal()  # the last step ended (any state)
    _delivered = Signal(object)  # (callback, value) from the loop thread

    def __init__(self, script: DemoScript, context: PageContext, bench: BenchPage,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.script = script
        self.index = 0  # the next step to run
        self._context = context
        self._server = context.server
        self._backend = context.backend
        self._bench = bench
        # What reset() puts back: the settings in force now, then each one applied and saved from elsewhere (the
        # Server page, a sweep's recommendation), never the ones this director applies for a step.
        self._original: ServerSettings = context.server.settings
        self.session = ConsoleSession(context.loop, context.backend.console, context.meter, self,
                                      watchdog=context.watchdog, counter_factory=context.backend.prompt_counter,
                                      catalog_factory=context.backend.catalog
                                      if context.backend.capabilities.lists_loaded else None)
        self.states: list[StepState] = [StepState.WAITING] * len(script)
        self.results: list[StepResult | None] = [None] * len(script)
        self._run: _Running | None = None
        self._token = 0
        self._last_live: LiveRequests = IDLE
        # The server's lifecycle work this director started and that outlives a stopped step: a restart, a sweep
        # (cancelled, putting the settings back). The next step, or a reset's restore, waits for them.
        self._apply_future: concurrent.futures.Future[ServerStatus] | None = None
        self._applying: ServerSettings | None = None
        self._report: ApplyReport | None = None
        self._sweeping = False
        self._sweep_said = ""  # the sweep's last notice
        self._deferred: list[Callable[[], None]] = []
        self._background = Background(context.loop, self)  # the history's SQLite, off the GUI thread
        self._loaded: list[RunningModel] = []  # the models the server has in memory, where it lists them

        self._live_timer = QTimer(self)
        self._live_timer.setInterval(LIVE_INTERVAL_MS)
        self._live_timer.timeout.connect(self._emit_live)
        self._limit = QTimer(self)
        self._limit.setSingleShot(True)
        self._limit.timeout.connect(self._timed_out)
        self._delivered.connect(self._deliver, Qt.ConnectionType.QueuedConnection)
        # Bound methods of this object: what the loop thread emits arrives queued, on the GUI thread.
        session, server, sweeps = self.session, self._server, bench.sweeps
        wiring: tuple[tuple[SignalInstance, Callable[..., None]], ...] = (
            (session.models_loaded, self._on_models), (session.models_failed, self._on_models_failed),
            (session.details_loaded, self._on_details), (session.details_failed, self._on_details_failed),
            (session.run_progress, self._on_progress), (session.run_finished, self._on_run_finished),
            (server.apply_checked, self._on_apply_checked), (server.running_models_changed, self._on_loaded),
            (server.settings_applied, self._on_settings_saved),
            (sweeps.finished, self._on_sweep_finished), (sweeps.failed, self._on_sweep_failed),
            (sweeps.progress, self._on_sweep_progress))
        for signal, slot in wiring:
            signal.connect(slot)

    # --- the agreed API ----------------------------------------------------------------------
    @property
    def running(self) -> bool:
        """True while a step runs."""
        return self._run is not None

    def advance(self) -> None:
        """Run the next step (while one runs: nothing, and a notice saying how to stop it)."""
        if self._run is not None:
            self.notice.emit(f"Step {self._run.index + 1} is still running: Esc stops it")
            return
        if self.index >= len(self.script):
            self.notice.emit("The script is over: R goes back to the first step")
            return
        index = self.index
        self.index += 1
        step = self.script.step(index)
        self.notice.emit("")  # what was said about the last step is over
        self._token += 1
        run = self._run = _Running(self._token, index, step, self._server.settings.base_url)
        self._set_state(index, StepState.RUNNING, None)
        if step.action is StepAction.NOTE:
            self._finish(StepState.DONE)
            return
        self._limit.start(round(step.timeout_s * 1000))
        self._live_timer.start()
        self._when_free(lambda: self._begin(run))

    def stop_all(self) -> None:
        """Stop every request, apply wait and sweep of the running step at once; the step is STOPPED."""
        if self._run is not None:
            self._finish(StepState.STOPPED, reason="Stopped by the presenter")

    def reset(self) -> None:
        """Stop everything, put back the saved settings (those in force when the director was made, or applied
        since from elsewhere; through the guarded apply, only where they differ) and go back to the first step,
        every step waiting."""
        self.stop_all()
        self._clear_steps()
        self._when_free(self._restore)  # after a restart still going, whose settings are not in force yet

    def set_script(self, script: DemoScript) -> None:
        """Run another script from its first step (what runs now is stopped)."""
        self.stop_all()
        self.script = script
        self._clear_steps()

    def shutdown(self) -> None:
        """Stop what runs and close the console's connections (blocking: call on quit)."""
        self.stop_all()
        self._live_timer.stop()
        self.session.shutdown()

    def state(self, index: int) -> StepState:
        """Where step `index` stands."""
        return self.states[index]

    def result(self, index: int) -> StepResult | None:
        """How step `index` ended (None while waiting or running)."""
        return self.results[index]

    # --- steps ----------------------------------------------------------------------------------
    def _clear_steps(self) -> None:
        self.index = 0
        self.states = [StepState.WAITING] * len(self.script)
        self.results = [None] * len(self.script)
        for index in range(len(self.script)):
            self.step_changed.emit(index, StepState.WAITING, None)
        self._last_live = IDLE
        self.live_changed.emit(IDLE)

    def _set_state(self, index: int, state: StepState, result: StepResult | None) -> None:
        self.states[index] = state
        self.results[index] = result
        self.step_changed.emit(index, state, result)

    def _current(self, run: _Running, waiting: str = "") -> bool:
        """True when `run` is still the running step (and, given `waiting`, waits for that)."""
        return run is self._run and (not waiting or run.waiting == waiting)

    def _begin(self, run: _Running) -> None:
        if not self._current(run):
            return
        step = run.step
        if step.sends_prompts:
            preset = builtin(step.preset) if not step.prompt else None
            if not step.prompt and preset is None:
                self._fail(StepFailure.UNAVAILABLE, f"There is no test prompt named {step.preset!r}: give the step "
                                                    "a prompt or a preset the Prompt page lists")
                return
            text = step.prompt or (preset.prompt if preset else "")
            run.request = PromptRequest(model="", prompt=text, system=preset.system if preset else "",
                                        options=PromptOptions(num_predict=step.max_tokens))
        status = self._server.status
        if not status.state.is_running:
            self._fail(StepFailure.NO_SERVER, f"No server is running at {run.url} ({status.state.value}): start it "
                                              "on the Server page")
            return
        run.waiting = "models"
        self.session.refresh_models(run.url)

    def _on_models(self, url: str, models: list[LocalModel]) -> None:
        run = self._run
        if run is None or not self._current(run, "models") or url != run.url:
            return
        if not models:
            self._fail(StepFailure.NO_MODEL, f"{self._backend.display_name} at {url} has no model to send to")
            return
        loaded = {name for m in self._loaded for name in (m.name, m.model)}
        run.model = next((m.name for m in models if m.name in loaded), models[0].name)
        if run.step.action is StepAction.SWEEP:
            self._sweep(run)
            return
        run.waiting = "details"
        self.session.load_details(url, run.model)

    def _on_loaded(self, models: list[RunningModel]) -> None:
        self._loaded = list(models)

    def _on_models_failed(self, url: str, text: str) -> None:
        run = self._run
        if run is not None and self._current(run, "models") and url == run.url:
            self._fail(StepFailure.NO_SERVER, text)

    def _on_details(self, model: str, details: ModelDetails) -> None:
        run = self._run
        if run is not None and self._current(run, "details") and model == run.model:
            run.details = details
            self._act(run)

    def _on_details_failed(self, model: str, _text: str) -> None:
        run = self._run
        if run is not None and self._current(run, "details") and model == run.model:
            self._act(run)  # sent without a thinking mode; an A/B says it cannot tell

    def _act(self, run: _Running) -> None:
        action = run.step.action
        if action is StepAction.AB:
            self._ab(run)
        elif action is StepAction.PARALLEL:
            problem = self._cannot_change()
            if problem is not None:
                self._fail(*problem)
                return
            run.values = list(run.step.values)
            self._next_value(run)
        else:
            self._send(run, run.step.users if action is StepAction.BURST else 1)

    def _think(self, run: _Running) -> bool | None:
        """The thinking mode to send: the step's where the model can switch it, else none (as the Prompt page)."""
        details = run.details
        if details is None or not details.supports_thinking or not self._backend.can("thinking_control"):
            if run.step.think and details is not None:
                self.notice.emit(f"{run.model} cannot think: sent without thinking")
            return None
        return run.step.think

    # --- prompts --------------------------------------------------------------------------------
    def _send(self, run: _Running, copies: int, kind: str = "") -> None:
        assert run.request is not None
        request = PromptRequest(model=run.model, prompt=run.request.prompt, system=run.request.system,
                                think=self._think(run), options=run.request.options)
        runs = []
        if kind == "ab":
            runs.append(self.session.start(run.url, "ab", request, think=True))
        else:
            left = copies
            while left > 0:
                n = min(left, MAX_BURST)
                runs.append(self.session.start(run.url, "chat" if copies == 1 else "burst", request, copies=n))
                left -= n
        run.batch = _Batch(runs, copies, time.monotonic())
        run.sent += copies
        run.waiting = "send"

    def _on_progress(self, console_run: ConsoleRun, drained: Drained) -> None:
        batch = self._run.batch if self._run is not None else None
        if batch is None or console_run not in batch.runs:
            return
        number = batch.runs.index(console_run)
        for index, stats in drained.live.items():
            batch.live[(number, index)] = stats
        for outcome in drained.outcomes:
            batch.outcomes[(number, outcome.index)] = outcome

    def _on_run_finished(self, console_run: ConsoleRun) -> None:
        run = self._run
        batch = run.batch if run is not None else None
        if run is None or batch is None or console_run not in batch.runs:
            return
        number = batch.runs.index(console_run)
        for index, outcome in console_run.outcomes.items():
            batch.outcomes[(number, index)] = outcome
        batch.ended.add(number)
        if batch.over:
            self._batch_over(run, batch)

    def _batch_over(self, run: _Running, batch: _Batch) -> None:
        self._emit_live()
        run.batch = None
        run.done += len(batch.outcomes)
        outcomes = list(batch.outcomes.values())
        crash = next((r.error for r in batch.runs if r.error), "")
        errors = [o.error.user_text() for o in outcomes if o.error is not None]
        if run.step.action is StepAction.AB:
            self._ab_over(batch, crash or (errors[0] if errors else ""))
            return
        stats: list[ReplyStats | None] = [o.stats for o in outcomes] + [None] * (batch.requested - len(outcomes))
        summary = summarize_burst(stats, failed=len(errors), stopped=sum(1 for o in outcomes if o.stopped))
        if summary.completed == 0:
            why = crash or (errors[0] if errors else "no reply finished")
            many = "The request" if batch.requested == 1 else f"Every one of the {batch.requested} requests"
            self._fail(StepFailure.REQUESTS_FAILED, f"{many} failed: {why}")
            return
        if run.step.action is StepAction.PARALLEL and run.value is not None:
            run.rates.append((run.value, summary.aggregate_tokens_per_s))
            if summary.aggregate_tokens_per_s is not None:
                run.figures[parallel_key(run.value)] = summary.aggregate_tokens_per_s
            self._next_value(run)
            return
        each = median_rate([o.stats for o in outcomes if o.ok])
        self._finish(StepState.DONE, headline=burst_headline(summary, each), figures=burst_figures(summary, each))

    # --- A/B ------------------------------------------------------------------------------------
    def _ab(self, run: _Running) -> None:
        details = run.details
        if details is None:
            self._fail(StepFailure.CANNOT_THINK, f"Could not read whether {run.model} can think: the server did not "
                                                 "describe it")
        elif not details.supports_thinking:
            self._fail(StepFailure.CANNOT_THINK, f"{run.model} cannot think: {short_reason(details.why_no_thinking())}")
        elif not self._backend.can("thinking_control"):
            self._fail(StepFailure.CANNOT_THINK, f"{run.model} cannot switch thinking here: "
                                                 f"{self._backend.why_not('thinking_control')}")
        else:
            self._send(run, 2, kind="ab")

    def _ab_over(self, batch: _Batch, error: str) -> None:
        with_thinking, without = batch.outcomes.get((0, 0)), batch.outcomes.get((0, 1))
        if with_thinking is None or without is None or not (with_thinking.ok and without.ok):
            self._fail(StepFailure.REQUESTS_FAILED, f"The comparison did not finish: {error or 'a reply was lost'}")
            return
        cost = thinking_cost(with_thinking.stats, without.stats)
        figures = {"thinking tokens": float(cost.thinking_tokens),
                   "with thinking s": with_thinking.stats.wall_ms / 1e3, "without s": without.stats.wall_ms / 1e3}
        self._finish(StepState.DONE, headline=ab_headline(cost), figures=figures)

    # --- parallel -------------------------------------------------------------------------------
    def _cannot_change(self) -> tuple[StepFailure, str] | None:
        """Why the server's settings cannot be changed now (None: they can)."""
        if not self._backend.can("restarts_with_settings"):
            return StepFailure.CANNOT_APPLY, self._backend.why_not("restarts_with_settings")
        status = self._server.status
        if status.state is ServerState.RUNNING_ATTACHED:
            return StepFailure.CANNOT_APPLY, (f"The server is attached, run by {status.run_by or 'another process'}: "
                                              "its settings are its own (start it from ollama-deck to change them)")
        if self._server.held_reason:
            return StepFailure.CANNOT_APPLY, first_sentence(self._server.held_reason)
        if self._bench.sweeps.running:
            return StepFailure.CANNOT_APPLY, "A sweep is running on the Benchmark page"
        if status.state is not ServerState.RUNNING_MANAGED:
            return StepFailure.NO_SERVER, f"The server is not running ({status.state.value})"
        return None

    def _next_value(self, run: _Running) -> None:
        if not run.values:
            self._finish(StepState.DONE, headline=parallel_headline(run.rates, run.step.users), figures=run.figures)
            return
        value = run.value = run.values.pop(0)
        if self._server.settings.num_parallel == value:
            self._send(run, run.step.users)  # already in force: no restart
            return
        problem = self._cannot_change()
        if problem is not None:
            self._fail(*problem)
            return
        self.notice.emit(f"Restarting the server with parallel {value}…")
        run.waiting = "apply"
        self._apply(self._server.settings.replace(num_parallel=value), run.model,
                    lambda future: self._applied(run, value, future))

    def _apply(self, settings: ServerSettings, model: str | None,
               then: Callable[[concurrent.futures.Future[ServerStatus]], None]) -> None:
        """The controller's guarded apply; `then(future)` on the GUI thread when it is over."""
        self._applying, self._report = settings, None
        # Not saved: a step's settings are the demo's, and the user's saved ones stay on disk as they were.
        future = self._apply_future = self._server.apply(settings, model=model or None, keep=False)

        def over(done: concurrent.futures.Future[ServerStatus]) -> None:
            self._apply_future = None
            self._applying = None
            self.notice.emit("")  # "Restarting …" is over
            then(done)
            self._run_deferred()

        future.add_done_callback(lambda done: self._delivered.emit((over, done)))

    def _on_settings_saved(self, settings: ServerSettings) -> None:
        # Saved while this director applies nothing: the user's own settings, which a reset comes back to. (What
        # the director's own apply saves arrives before that apply ends, so it is told apart by `_applying`.)
        if self._applying is None:
            self._original = settings

    def _on_apply_checked(self, report: ApplyReport) -> None:
        if self._applying is not None and report.tried == self._applying:
            self._report = report

    def _applied(self, run: _Running, value: int, future: concurrent.futures.Future[ServerStatus]) -> None:
        if not self._current(run, "apply"):
            return
        report = self._report
        if future.cancelled():
            self._fail(StepFailure.CANNOT_APPLY, first_sentence(self._server.held_reason or "The restart was refused"))
        elif (exc := future.exception()) is not None:
            self._fail(StepFailure.CANNOT_APPLY, exc.user_text() if isinstance(exc, DeckError) else repr(exc))
        elif report is not None and not report.judgement.keep:
            self._fail(StepFailure.CANNOT_APPLY, f"Parallel {value} was rolled back: {report.judgement.reason}")
        elif (status := future.result()).state is not ServerState.RUNNING_MANAGED:
            self._fail(StepFailure.CANNOT_APPLY, f"The server did not come back with parallel {value}: "
                                                 f"{status.message or status.state.value}")
        else:
            self._send(run, run.step.users)

    def _restore(self) -> None:
        """Reset: the saved settings, where they differ and can be applied (a stopped server gets them for its
        next start)."""
        problem = self._cannot_change()
        if self._server.settings == self._original:
            return
        if problem is not None and problem[0] is not StepFailure.NO_SERVER:
            self.notice.emit(f"The settings were not put back: {problem[1]}")
            return
        self.notice.emit(f"Putting the settings back: parallel {self._original.num_parallel}")
        self._apply(self._original, None, lambda _future: None)

    # --- sweep ----------------------------------------------------------------------------------
    def _sweep(self, run: _Running) -> None:
        history = self._context.history
        if not run.step.use_history or history is None:
            self._start_sweep(run)
            return
        run.waiting = "history"
        self._background.call(history.list_runs, on_done=lambda runs: self._listed(run, runs),
                              on_error=lambda text: self._history_unread(run, text))

    def _listed(self, run: _Running, runs: list[RunSummary]) -> None:
        if not self._current(run, "history"):
            return
        kept = [s for s in runs if s.model == run.model and s.status is RunStatus.FINISHED and s.recommended]
        history = self._context.history
        if not kept or history is None:
            self._start_sweep(run)
            return
        newest = max(kept, key=lambda s: s.started_at)
        self._background.call(history.load, newest.run_id, on_done=lambda kept: self._kept_run(run, kept),
                              on_error=lambda text: self._history_unread(run, text))

    def _history_unread(self, run: _Running, text: str) -> None:
        """The history could not be read: a short sweep instead, and the presenter is told why."""
        if self._current(run, "history"):
            self.notice.emit(f"The benchmark history could not be read ({first_sentence(text)}): sweeping instead")
            self._start_sweep(run)

    def _kept_run(self, run: _Running, kept: SweepRun) -> None:
        if not self._current(run, "history"):
            return
        when = kept.started_at[:16].replace("T", " ")
        self._finish(StepState.DONE, headline=f"{sweep_headline(kept, kept.recommendation)} (kept run of {when})",
                     figures=sweep_figures(kept))

    def _start_sweep(self, run: _Running) -> None:
        if not self._current(run):
            return
        problem = self._cannot_change()
        if problem is not None:
            self._fail(*problem)
            return
        step = run.step
        plan = LoadPlan(model=run.model, requests=step.requests, num_predict=step.max_tokens,
                        think=False if self._backend.can("thinking_control") else None)
        spec = SweepSpec(self._server.settings, SweepAxes(parallel=step.parallel), plan, managed=True)
        try:
            spec.plan()
        except SweepPlanError as exc:
            self._fail(StepFailure.SWEEP_FAILED, first_sentence(str(exc)))
            return
        run.waiting = "sweep"
        self._bench.start_sweep(spec)
        if not self._bench.sweeps.running:
            self._fail(StepFailure.SWEEP_FAILED, "The Benchmark page did not start the sweep")
            return
        self._sweeping = True

    def _on_sweep_progress(self, progress: SweepProgress) -> None:
        run = self._run
        if run is None or not self._current(run, "sweep"):
            return
        what = f", {progress.label}" if progress.label else ""
        text = (f"Sweep: point {min(progress.point + 1, progress.points)} of {progress.points}{what}: "
                f"{PHASE_WORDS.get(progress.phase, progress.phase).lower()}")
        if text != self._sweep_said:  # a new point or phase, not each request
            self._sweep_said = text
            self.notice.emit(text)

    def _on_sweep_finished(self, swept: SweepRun) -> None:
        self._sweep_over(swept)

    def _on_sweep_failed(self, text: str) -> None:
        self._sweep_over(text)

    def _sweep_over(self, outcome: SweepRun | str) -> None:
        """The sweep this director started ended (a run, or why it failed): the step says so, and what waited
        for the server (the next step, a reset's restore) goes on."""
        if not self._sweeping:
            return  # one started on the Benchmark page by hand
        self._sweeping = False
        run = self._run
        if run is not None and self._current(run, "sweep"):
            if isinstance(outcome, str):
                self._fail(StepFailure.SWEEP_FAILED, outcome)
            elif outcome.status is RunStatus.CANCELLED:
                self._finish(StepState.STOPPED, reason="The sweep was cancelled")
            else:
                self._finish(StepState.DONE, headline=sweep_headline(outcome, outcome.recommendation),
                             figures=sweep_figures(outcome))
        self._run_deferred()

    # --- ending ---------------------------------------------------------------------------------
    def _fail(self, failure: StepFailure, reason: str) -> None:
        self._finish(StepState.FAILED, reason=reason, failure=failure)

    def _timed_out(self) -> None:
        run = self._run
        if run is not None:
            self._finish(StepState.STOPPED, reason=f"Stopped after {run.step.timeout_s:g} s, the step's time limit",
                         failure=StepFailure.TIMED_OUT)

    def _finish(self, state: StepState, *, headline: str = "", reason: str = "", failure: StepFailure | None = None,
                figures: dict[str, float] | None = None) -> None:
        """End the running step: whatever it still has in flight is stopped (a cancelled sweep puts the server
        back on its own), then its result is said."""
        run = self._run
        if run is None:
            return
        self._run = None
        self._limit.stop()
        self._live_timer.stop()
        if run.batch is not None:
            for console_run in run.batch.runs:
                self.session.stop(console_run)
            self._emit_live(run, stopped=True)
        if run.waiting == "sweep" and self._sweeping:
            self._bench.cancel_sweep()  # kept by the sweep even before its run began on the loop thread
        line = " ".join(reason.split())  # one line, whatever the server's text held
        self._set_state(run.index, state, StepResult(state, headline, line, failure, dict(figures or run.figures)))
        if run.index == len(self.script) - 1:
            self.script_finished.emit()

    def _emit_live(self, run: _Running | None = None, *, stopped: bool = False) -> None:
        run = run or self._run
        batch = run.batch if run is not None else None
        if run is None or batch is None:
            return
        live = batch.live_figures(run.sent, run.done)
        if stopped:
            live = LiveRequests(0, live.sent, live.finished, live.per_request_tps, live.ttft_ms, live.aggregate_tps)
        if live != self._last_live:
            self._last_live = live
            self.live_changed.emit(live)

    # --- the loop thread's results and the server's lifecycle -----------------------------------------
    def _when_free(self, work: Callable[[], None]) -> None:
        """`work` now, or once this director's restart or cancelled sweep is over."""
        if self._apply_future is None and not self._sweeping:
            work()
            return
        self.notice.emit("Waiting for the server's restart to finish…")
        self._deferred.append(work)

    def _run_deferred(self) -> None:
        while self._deferred and self._apply_future is None and not self._sweeping:
            self._deferred.pop(0)()

    def _deliver(self, pair: tuple[Callable[[Any], None], Any]) -> None:
        callback, value = pair
        callback(value)


__all__ = ["DemoDirector"]
