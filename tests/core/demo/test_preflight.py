"""The pre-flight's pure rules: check lines and exit codes, the GPU, screen and font verdicts, and the script's
time estimate (hypothesis feeds it odd scripts and rates)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.adapters.demo_script import load_script
from app.core.console.presets import Preset
from app.core.demo.preflight import (
    CPU_NOTE,
    Check,
    CheckName,
    CheckVerdict,
    FontCoverage,
    ScreenFacts,
    StepRate,
    estimate_script,
    exit_code,
    first_prompt_step,
    fonts_check,
    gpu_check,
    screen_check,
    script_of,
    script_text,
    shown_characters,
    step_prompt,
    step_seconds,
    step_time_check,
    summary,
)
from app.core.demo.script import DemoScript, DemoStep, ScriptError, StepAction, script_from_dict

PASS, WARN, FAIL = CheckVerdict.PASS, CheckVerdict.WARN, CheckVerdict.FAIL


def _step(action: StepAction, **kw) -> DemoStep:
    return DemoStep(title=action.value, says="…", action=action, **kw)


# ---- lines, exit codes, summary --------------------------------------------------------------------------------

def test_a_line_names_verdict_check_and_detail_and_the_fix_only_when_not_passed() -> None:
    assert Check(CheckName.SERVER, PASS, "answers", "ignored").line() == "PASS  server  answers"
    line = Check(CheckName.FONTS, FAIL, "no CJK\nfont", "install\tone").line()
    assert line == "FAIL  fonts  no CJK font — fix: install one"
    assert "\n" not in Check(CheckName.MODEL, WARN, "a\r\nb\x00c").detail


def test_exit_code_fails_only_on_a_fail() -> None:
    checks = [Check(CheckName.GPU, WARN, "cpu", "x"), Check(CheckName.SERVER, PASS, "ok")]
    assert exit_code(checks) == 0
    assert exit_code([*checks, Check(CheckName.PORT, FAIL, "taken", "stop it")]) == 1
    assert summary(checks) == "1 passed, 1 warned, 0 failed: ready, read the warnings"
    assert summary([*checks, Check(CheckName.PORT, FAIL, "taken", "x")]).endswith("fix port before the talk")
    assert summary([Check(CheckName.GPU, PASS, "x")]) == "1 passed, 0 warned, 0 failed: ready"


# ---- GPU -------------------------------------------------------------------------------------------------------

def test_gpu_passes_with_its_name_and_memory_and_warns_on_the_cpu() -> None:
    ok = gpu_check("NVIDIA GeForce RTX 4090", 24564.0, "")
    assert (ok.verdict, ok.detail) == (PASS, "NVIDIA GeForce RTX 4090, 24.0 GiB")
    cpu = gpu_check(None, None, "No NVIDIA driver found (libnvidia-ml.so could not be loaded) — GPU graphs are off")
    assert cpu.verdict is WARN
    assert CPU_NOTE in cpu.detail and "No NVIDIA driver found" in cpu.detail and "GPU graphs" not in cpu.detail


# ---- screen ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("scale", [1.0, 1.5])
def test_a_1280x720_projector_passes_at_scale_1_and_1_5(scale: float) -> None:
    facts = ScreenFacts(round(1280 / scale), round(720 / scale), scale=scale, platform="xcb", name="HDMI-1")
    check = screen_check(facts)
    assert check.verdict is PASS
    assert check.detail.startswith(f"HDMI-1 is {round(1280 / scale)}x{round(720 / scale)} logical pixels")
    if scale != 1:
        assert "(1280x720 at scale 1.5)" in check.detail


def test_small_screens_warn_then_fail_and_offscreen_says_so() -> None:
    assert screen_check(ScreenFacts(760, 430, platform="xcb")).verdict is WARN
    tiny = screen_check(ScreenFacts(600, 340, platform="wayland"))
    assert tiny.verdict is FAIL and "800x450" in tiny.detail and tiny.fix
    off = screen_check(ScreenFacts(1920, 1080, platform="offscreen"))
    assert off.verdict is WARN and off.detail.startswith("no real screen")
    assert screen_check(None).verdict is FAIL


# ---- fonts -----------------------------------------------------------------------------------------------------

def test_the_builtin_script_shows_chinese_through_its_presets() -> None:
    script = load_script("builtin")
    text = script_text(script)
    assert "请用中文写一篇关于人工智能发展趋势的300字短文" in text  # step 1's preset, resolved
    assert "小明有10个苹果" in text  # the A/B's
    assert script.title in text and script.steps[0].says in text
    chars = shown_characters(text)
    assert len(chars) == len(set(chars)) and " " not in chars and "\n" not in chars
    assert {script_of(c) for c in "请苹"} == {"Chinese (Han)"}
    assert script_of("a") == "Latin" and script_of("ひ") == "Japanese (kana)" and script_of("한") == "Korean (Hangul)"


def test_a_user_preset_is_resolved_before_the_builtin_one_and_an_unknown_one_is_empty() -> None:
    own = Preset(key="ai-trends-essay-zh", title="mine", prompt="my own words")
    step = _step(StepAction.PROMPT, preset="ai-trends-essay-zh")
    assert step_prompt(step, [own]) == "my own words"
    assert step_prompt(_step(StepAction.PROMPT, preset="nope")) == ""
    assert step_prompt(_step(StepAction.NOTE)) == ""
    assert step_prompt(_step(StepAction.BURST, prompt="typed")) == "typed"


def test_fonts_fail_naming_the_script_and_the_install_and_pass_naming_the_fallback() -> None:
    failed = fonts_check(FontCoverage("DejaVu Sans", missing="请用中", checked=40))
    assert failed.verdict is FAIL
    assert "3 of the script's 40 characters" in failed.detail and "Chinese (Han)" in failed.detail
    assert "sudo apt install fonts-noto-cjk" in failed.fix
    other = fonts_check(FontCoverage("DejaVu Sans", missing="ก", checked=5))
    assert "Thai" in other.detail and "fonts-noto" in other.fix and "cjk" not in other.fix
    ok = fonts_check(FontCoverage("DejaVu Sans", ("Droid Sans Fallback",), "", 75))
    assert ok.verdict is PASS and "Droid Sans Fallback for what it lacks" in ok.detail
    assert fonts_check(FontCoverage("Noto Sans", checked=10)).detail == "all 10 characters drawn by Noto Sans"


# ---- the time estimate -----------------------------------------------------------------------------------------

RATE = StepRate(ttft_s=0.5, decode_tps=50.0)


def test_each_action_is_counted_by_its_requests_and_tokens() -> None:
    assert step_seconds(_step(StepAction.PROMPT, max_tokens=100), RATE) == pytest.approx(2.5)
    assert step_seconds(_step(StepAction.BURST, users=8, max_tokens=50), RATE) == pytest.approx(0.5 + 8)
    parallel = _step(StepAction.PARALLEL, users=4, values=(1, 8), max_tokens=25)
    assert step_seconds(parallel, RATE, restart_s=10) == pytest.approx(2 * (10 + 0.5 + 2))
    assert step_seconds(_step(StepAction.AB, max_tokens=100), RATE) == pytest.approx(5.0)
    sweep = _step(StepAction.SWEEP, parallel=(1, 2, 4), requests=8, max_tokens=25)
    assert step_seconds(sweep, RATE, restart_s=10) == pytest.approx(3 * (10 + 0.5 + 4))
    assert step_seconds(_step(StepAction.NOTE), RATE) == 0.0


def test_the_builtin_script_fits_its_five_minutes_on_a_laptop_rate_and_not_on_a_crawl() -> None:
    script = load_script("builtin")
    assert first_prompt_step(script) == 0
    ok = step_time_check(script, StepRate(0.4, 60.0), 96)
    assert ok.verdict is PASS
    assert ok.detail.startswith("96 tokens: TTFT 400 ms, 60.0 tok/s; the script takes about")
    slow = step_time_check(script, StepRate(2.0, 5.0), 96)
    assert slow.verdict is WARN and "alone takes about" in slow.detail and "max_tokens" in slow.fix


def test_a_script_over_its_minutes_with_no_slow_step_warns_to_shorten_it() -> None:
    steps = tuple(_step(StepAction.PROMPT, max_tokens=2000) for _ in range(20))  # 40.5 s each at 50 tok/s
    script = DemoScript("long", steps, minutes=5.0)
    estimate = estimate_script(script, RATE)
    assert not estimate.fits and max(estimate.steps) < 60
    check = step_time_check(script, RATE, 10)
    assert check.verdict is WARN and "shorten the script" in check.fix


@pytest.mark.parametrize("ttft, tps", [(-1.0, 10.0), (math.nan, 10.0), (0.1, 0.0), (0.1, -3.0), (0.1, math.inf)])
def test_a_rate_that_is_not_a_measurement_is_refused(ttft: float, tps: float) -> None:
    with pytest.raises(ValueError):
        StepRate(ttft, tps)


_values = st.one_of(st.integers(-5, 5000), st.floats(allow_nan=True), st.text(max_size=5), st.booleans(),
                    st.lists(st.integers(-2, 70), max_size=10), st.none())
_steps = st.fixed_dictionaries(
    {"title": st.text(min_size=0, max_size=70), "says": st.text(max_size=10),
     "action": st.sampled_from([a.value for a in StepAction] + ["dance", ""])},
    optional={k: _values for k in ("max_tokens", "users", "values", "parallel", "requests", "preset", "prompt",
                                   "use_history", "timeout_s", "think")})
_scripts = st.fixed_dictionaries({"step": st.lists(_steps, max_size=6)},
                                 optional={"title": st.text(max_size=70), "minutes": _values})
_rates = st.builds(StepRate, st.floats(0, 60, allow_nan=False), st.floats(0.01, 5000, allow_nan=False))


@settings(max_examples=300, deadline=None)
@given(_scripts, _rates, _rates)
def test_any_script_is_refused_with_its_reason_or_estimated_finite_and_faster_for_a_faster_rate(
        data: dict, rate: StepRate, other: StepRate) -> None:
    try:
        script = script_from_dict(data, "hostile.toml")
    except ScriptError as exc:
        assert str(exc).startswith("hostile.toml")
        return
    estimate = estimate_script(script, rate)
    assert all(math.isfinite(s) and s >= 0 for s in estimate.steps) and len(estimate.steps) == len(script)
    faster = StepRate(min(rate.ttft_s, other.ttft_s), max(rate.decode_tps, other.decode_tps))
    assert estimate_script(script, faster).total_s <= estimate.total_s * (1 + 1e-9)
    check = step_time_check(script, rate, 1)
    assert check.verdict in (PASS, WARN) and "\n" not in check.line()
    for c in script_text(script):
        script_of(c)  # names any character without raising


@given(st.sampled_from(list(CheckName)), st.sampled_from(list(CheckVerdict)), st.text(), st.text())
def test_any_words_make_one_printable_line(name: CheckName, verdict: CheckVerdict, detail: str, fix: str) -> None:
    line = Check(name, verdict, detail, fix).line()
    assert line.startswith(f"{verdict.value}  {name.value}  ")
    assert all(c.isprintable() for c in line)
