"""The demo director on the real embedded engine (the bundled llama-server on SmolLM2-135M, started by the
window's composition root as --demo starts it): each kind of step run as the presenter's key runs it, with
tiny replies so that a loaded 2-core machine gets through them in seconds."""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

import pytest

from app.core.bench.outcome import RunStatus
from app.core.demo.live import LiveRequests
from app.core.demo.script import DemoScript, DemoStep, StepAction, StepFailure, StepState
from app.core.server.state import ServerState
from app.ui.app.main import DeckApp, page_context
from app.ui.presenter.director import DemoDirector
from tests.core.demo.sweep_runs import kept_run

WAIT_MS = 120_000  # ceilings for a loaded 2-core machine; each step takes seconds
PROMPT = "Say hello."
# About 3,000 tokens to read before the first reply token: a burst of them keeps the engine busy for seconds
# whatever the model answers (within the engine's 4,096 tokens per slot).
LONG_PROMPT = "apple " * 3000 + "\nHow many apples?"


def _args(tmp_path: Path) -> argparse.Namespace:
    return argparse.Namespace(config_dir=str(tmp_path / "cfg"), url=None, page="dashboard", screenshot=None,
                              backend=None, demo=True)


def step(action: StepAction, **fields) -> DemoStep:
    fields.setdefault("title", action.value)
    fields.setdefault("says", f"A {action.value} step.")
    if action in (StepAction.PROMPT, StepAction.BURST, StepAction.PARALLEL, StepAction.AB):
        if "preset" not in fields:
            fields.setdefault("prompt", PROMPT)
        fields.setdefault("max_tokens", 8)
    return DemoStep(action=action, **fields)


class Stage:
    """The demo window with its engine running and a director over it, recording what the director says."""

    def __init__(self, qtbot, deck: DeckApp, tmp_path: Path, *steps: DemoStep) -> None:
        self.qtbot = qtbot
        self.deck = deck
        context = page_context(deck, tmp_path / "cfg")
        self.context = dataclasses.replace(context, history=deck.bench_page.history)  # the page's own history
        self.director = DemoDirector(DemoScript("Test", steps), self.context, deck.bench_page)
        self.live: list[LiveRequests] = []
        self.notices: list[str] = []
        self.changes: list[tuple[int, StepState]] = []
        self.director.live_changed.connect(self.live.append)
        self.director.notice.connect(self.notices.append)
        self.director.step_changed.connect(lambda i, state, _result: self.changes.append((i, state)))

    def run_step(self, index: int, wait_ms: int = WAIT_MS):
        """Advance to step `index` and wait until it ended; its result."""
        director = self.director
        assert director.index == index and not director.running
        director.advance()
        self.qtbot.waitUntil(lambda: director.state(index) not in (StepState.WAITING, StepState.RUNNING),
                             timeout=wait_ms)
        result = director.result(index)
        assert result is not None and result.state is director.state(index)
        return result

    def close(self) -> None:
        self.director.shutdown()


@pytest.fixture
def stage(qtbot, tmp_path, deck_factory, llama_server_binary, bundled_model):
    """Factory: a Stage over the given steps, on a demo window whose engine runs."""
    made: list[Stage] = []

    def make(*steps: DemoStep) -> Stage:
        deck = deck_factory(_args(tmp_path))
        qtbot.waitUntil(lambda: deck.controller.status.state is ServerState.RUNNING_MANAGED, timeout=WAIT_MS)
        made.append(Stage(qtbot, deck, tmp_path, *steps))
        return made[-1]

    yield make
    for one in made:
        one.close()


def one_line(text: str) -> bool:
    return bool(text.strip()) and "\n" not in text


@pytest.mark.engine
def test_a_prompt_a_burst_and_a_note_end_done_with_their_figures(stage) -> None:
    # The first as the built-in script's: the Prompt page's test prompt by its key.
    s = stage(step(StepAction.PROMPT, preset="ai-trends-essay-zh", max_tokens=12),
              step(StepAction.BURST, users=3, max_tokens=12),
              step(StepAction.NOTE))
    finished = []
    s.director.script_finished.connect(lambda: finished.append(True))
    prompt = s.run_step(0)
    assert prompt.state is StepState.DONE, prompt.reason
    assert prompt.headline.startswith("One user: ") and "tok/s" in prompt.headline and "TTFT" in prompt.headline
    assert prompt.figures["tok/s each"] > 0 and prompt.figures["TTFT ms"] > 0
    assert s.live and s.live[-1].sent == 1 and s.live[-1].finished == 1 and s.live[-1].in_flight == 0
    seen = len(s.live)

    began = time.monotonic()
    burst = s.run_step(1)
    took_s = time.monotonic() - began
    assert burst.state is StepState.DONE, burst.reason
    assert burst.headline.startswith("3 users: ") and "together" in burst.headline and "each" in burst.headline
    assert burst.figures["aggregate tok/s"] > 0 and burst.figures["tok/s each"] > 0
    live = s.live[seen:]
    assert len(live) <= took_s * 10 + 2  # at most about ten a second, never one per token or per drain
    assert live[-1].sent == 3 and live[-1].finished == 3 and live[-1].in_flight == 0
    assert live[-1].aggregate_tps and live[-1].ttft_ms and live[-1].per_request_tps
    assert s.deck.meter.in_flight == 0 and not s.director.session.active_runs

    note = s.run_step(2)
    assert note.state is StepState.DONE and finished == [True]
    assert s.changes[:2] == [(0, StepState.RUNNING), (0, StepState.DONE)]
    s.director.advance()  # past the end: nothing runs, a notice says how to start over
    assert not s.director.running and s.notices[-1].startswith("The script is over")


@pytest.mark.engine
def test_ab_on_smollm2_fails_cannot_think_without_sending_and_the_script_goes_on(stage) -> None:
    s = stage(step(StepAction.AB), step(StepAction.NOTE))
    tokens = s.deck.meter.total_tokens
    result = s.run_step(0)
    assert result.state is StepState.FAILED and result.failure is StepFailure.CANNOT_THINK
    assert one_line(result.reason) and "SmolLM2" in result.reason and " cannot think: " in result.reason
    assert result.reason.endswith(": this model's chat template has no thinking mode")  # the server's first clause
    assert s.deck.meter.total_tokens == tokens and not s.live  # nothing was sent
    assert s.run_step(1).state is StepState.DONE


@pytest.mark.engine
def test_parallel_applies_each_value_with_a_restart_and_reset_puts_the_settings_back(stage) -> None:
    s = stage(step(StepAction.PARALLEL, values=(1, 2), users=2, max_tokens=8), step(StepAction.NOTE))
    controller = s.deck.controller
    original = controller.settings.num_parallel
    assert original not in (1, 2)  # so each value is a restart, and so is the reset
    restarts = []
    controller.apply_checked.connect(restarts.append)
    result = s.run_step(0)
    assert result.state is StepState.DONE, result.reason
    assert set(result.figures) == {"parallel 1", "parallel 2"} and all(v > 0 for v in result.figures.values())
    assert "parallel 2 gives" in result.headline and "parallel 1's" in result.headline
    assert [r.tried.num_parallel for r in restarts] == [1, 2] and all(r.judgement.keep for r in restarts)
    assert controller.settings.num_parallel == 2  # the last value stays applied
    assert any("parallel 2" in n for n in s.notices)
    s.run_step(1)

    s.director.reset()
    assert s.director.index == 0 and s.director.states == [StepState.WAITING] * 2
    assert s.director.results == [None, None]
    s.qtbot.waitUntil(lambda: len(restarts) == 3, timeout=WAIT_MS)
    assert restarts[-1].tried.num_parallel == original and restarts[-1].judgement.keep
    assert controller.settings.num_parallel == original
    s.qtbot.waitUntil(lambda: controller.status.state is ServerState.RUNNING_MANAGED, timeout=WAIT_MS)


@pytest.mark.engine
def test_reset_comes_back_to_settings_applied_from_elsewhere_after_the_director_was_made(stage) -> None:
    s = stage(step(StepAction.PARALLEL, values=(1,), users=1, max_tokens=8))
    controller = s.deck.controller
    mine = 3 if controller.settings.num_parallel != 3 else 2  # neither the start's value nor the step's
    applied = controller.apply(dataclasses.replace(controller.settings, num_parallel=mine))  # the Server page's way
    s.qtbot.waitUntil(applied.done, timeout=WAIT_MS)
    assert controller.settings.num_parallel == mine
    result = s.run_step(0)
    assert result.state is StepState.DONE, result.reason
    assert controller.settings.num_parallel == 1  # the step's own apply is not what a reset comes back to
    s.director.reset()
    s.qtbot.waitUntil(lambda: controller.settings.num_parallel == mine
                      and controller.status.state is ServerState.RUNNING_MANAGED, timeout=WAIT_MS)


@pytest.mark.engine
def test_stop_all_during_a_burst_stops_it_at_once_and_nothing_stays_in_flight(stage) -> None:
    s = stage(step(StepAction.BURST, users=4, max_tokens=64, prompt=LONG_PROMPT), step(StepAction.NOTE))
    director = s.director
    director.advance()
    # The four requests went out (the token meter counts them as they start) and wait on the long prompt.
    s.qtbot.waitUntil(lambda: s.deck.meter.in_flight == 4 and bool(s.live) and s.live[-1].in_flight == 4,
                      timeout=WAIT_MS)
    assert director.running
    director.stop_all()
    assert not director.running and director.state(0) is StepState.STOPPED
    result = director.result(0)
    assert result is not None and one_line(result.reason) and result.failure is None
    s.qtbot.waitUntil(lambda: not director.session.active_runs and s.deck.meter.in_flight == 0, timeout=10_000)
    assert s.live[-1].in_flight == 0
    director.advance()
    assert director.state(1) is StepState.DONE


@pytest.mark.engine
def test_a_step_past_its_time_limit_is_stopped_as_timed_out(stage) -> None:
    # A script's steps take 5 s at least; made here directly, one takes a second, for a fast test.
    s = stage(step(StepAction.BURST, users=4, max_tokens=64, prompt=LONG_PROMPT, timeout_s=1.0))
    result = s.run_step(0, wait_ms=60_000)
    assert result.state is StepState.STOPPED and result.failure is StepFailure.TIMED_OUT
    assert result.reason == "Stopped after 1 s, the step's time limit"
    s.qtbot.waitUntil(lambda: not s.director.session.active_runs and s.deck.meter.in_flight == 0, timeout=10_000)


@pytest.mark.engine
def test_a_step_against_a_stopped_server_fails_no_server_and_the_next_one_runs(stage) -> None:
    s = stage(step(StepAction.BURST, users=2), step(StepAction.PARALLEL, values=(1, 2)), step(StepAction.NOTE))
    controller = s.deck.controller
    controller.stop()
    s.qtbot.waitUntil(lambda: controller.status.state is ServerState.STOPPED, timeout=WAIT_MS)
    for index in (0, 1):
        result = s.run_step(index)
        assert result.state is StepState.FAILED and result.failure is StepFailure.NO_SERVER
        assert one_line(result.reason) and result.reason.startswith("No server is running at http://127.0.0.1:")
    assert s.run_step(2).state is StepState.DONE


@pytest.mark.engine
def test_a_parallel_step_on_a_server_held_by_a_sweep_fails_cannot_apply_without_a_restart(stage) -> None:
    s = stage(step(StepAction.PARALLEL, values=(1, 2)), step(StepAction.NOTE))
    controller = s.deck.controller
    restarts = []
    controller.apply_checked.connect(restarts.append)
    controller.hold("A benchmark sweep is running: the server's controls wait until it ends. More words.")
    result = s.run_step(0)
    assert result.state is StepState.FAILED and result.failure is StepFailure.CANNOT_APPLY
    assert result.reason == "A benchmark sweep is running: the server's controls wait until it ends."
    assert restarts == [] and controller.settings.num_parallel == 4
    controller.release()
    assert s.run_step(1).state is StepState.DONE


@pytest.mark.engine
def test_a_sweep_step_shows_the_newest_kept_run_of_the_model_without_sweeping(stage) -> None:
    s = stage(step(StepAction.SWEEP, parallel=(1, 2), requests=2, max_tokens=8, use_history=True))
    page = s.deck.console_page
    page.refresh_models()
    s.qtbot.waitUntil(lambda: bool(page.controls.model()), timeout=WAIT_MS)
    model = page.controls.model()
    kept = kept_run(model)
    s.deck.bench_page.history.save(kept)
    swept = []
    s.deck.bench_page.sweeps.running_changed.connect(swept.append)
    result = s.run_step(0)
    assert result.state is StepState.DONE, result.reason
    best = kept.result_for(kept.recommendation.index)
    assert result.headline.startswith(f"Recommended: {best.point.label(kept.varying)}, ")
    assert "kept run of 2026-08-01 12:00" in result.headline
    assert set(result.figures) == {"parallel 1", "parallel 2"}
    assert swept == []  # no sweep ran


@pytest.mark.engine
def test_a_sweep_step_without_a_kept_run_sweeps_through_the_benchmark_page(stage) -> None:
    s = stage(step(StepAction.SWEEP, parallel=(1, 2), requests=2, max_tokens=8, use_history=True))
    controller = s.deck.controller
    before = controller.settings
    result = s.run_step(0, wait_ms=240_000)
    assert result.state is StepState.DONE, result.reason
    assert set(result.figures) == {"parallel 1", "parallel 2"}
    # On a shared machine other programs may compete at every point: then nothing is recommended, and it says why.
    assert result.headline.startswith(("Recommended: parallel ", "No recommendation: ")), result.headline
    assert s.deck.bench_page.current is not None and s.deck.bench_page.current.status is RunStatus.FINISHED
    said = [n for n in s.notices if n.startswith("Sweep: point ")]  # each point and phase once
    assert "Sweep: point 2 of 2, parallel 2: measuring" in said and len(said) == len(set(said))
    s.qtbot.waitUntil(lambda: not s.deck.bench_page.sweeps.running, timeout=WAIT_MS)
    assert controller.settings == before  # the sweep put the server back
    [summary] = s.deck.bench_page.history.list_runs()  # kept: the next talk's sweep step can show it
    assert summary.status is RunStatus.FINISHED


@pytest.mark.engine
def test_stop_all_during_a_sweep_cancels_it_and_the_next_step_waits_until_the_server_is_back(stage) -> None:
    s = stage(step(StepAction.SWEEP, parallel=(1, 2), requests=4, max_tokens=32),
              step(StepAction.PROMPT, max_tokens=8))
    controller, sweeps = s.deck.controller, s.deck.bench_page.sweeps
    before = controller.settings
    s.director.advance()
    s.qtbot.waitUntil(lambda: sweeps.running, timeout=WAIT_MS)
    ended = []
    sweeps.finished.connect(ended.append)
    s.director.stop_all()
    assert s.director.state(0) is StepState.STOPPED and not s.director.running
    result = s.run_step(1)  # runs once the cancelled sweep has put the server back
    assert result.state is StepState.DONE, result.reason
    assert [run.status for run in ended] == [RunStatus.CANCELLED]
    assert controller.settings == before
    assert any(n.startswith("Waiting for the server") for n in s.notices)


@pytest.mark.engine
def test_a_burst_the_server_refuses_fails_with_the_server_s_error_in_one_line(stage) -> None:
    # Twice the engine's 4,096 tokens per slot: llama-server refuses every copy before generating anything.
    s = stage(step(StepAction.BURST, users=2, prompt="apple " * 8000), step(StepAction.NOTE))
    result = s.run_step(0)
    assert result.state is StepState.FAILED and result.failure is StepFailure.REQUESTS_FAILED
    assert result.reason.startswith("Every one of the 2 requests failed: ") and one_line(result.reason)
    assert "context" in result.reason.lower(), result.reason
    assert s.run_step(1).state is StepState.DONE
