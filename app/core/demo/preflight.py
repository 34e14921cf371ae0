"""The pre-flight a speaker runs before a talk: what each check found, as a verdict with the measured fact and
the fix in the user's words, and the pure rules that turn facts into verdicts.

The checks (CheckName) are the server or the embedded engine, a model to send to, a free port, the GPU, the
fonts for the script's text, the screen, and the time one step takes (with the whole script's estimate). The
I/O that gathers the facts is app/services/preflight.py; the rules here take plain values.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from app.core.console.presets import BUILTIN_PRESETS, Preset
from app.core.demo.script import DemoScript, DemoStep, StepAction


class CheckName(StrEnum):
    """The pre-flight's checks, in the order they are listed."""

    SERVER = "server"
    MODEL = "model"
    PORT = "port"
    GPU = "gpu"
    FONTS = "fonts"
    SCREEN = "screen"
    STEP_TIME = "step time"


class CheckVerdict(StrEnum):
    """How a check came out: PASS, WARN (the demo still runs, with a caveat) or FAIL (fix it before the talk)."""

    PASS = "PASS"
    WARN = "WARN"
    FAIL = "FAIL"


@dataclass(frozen=True)
class Check:
    """One check's outcome: its verdict, one line with the measured fact, and the fix when it did not pass."""

    name: CheckName
    verdict: CheckVerdict
    detail: str
    fix: str = ""

    def __post_init__(self) -> None:
        # One line each, whatever a server or the system put in the words.
        object.__setattr__(self, "detail", one_line(self.detail))
        object.__setattr__(self, "fix", one_line(self.fix))

    def line(self) -> str:
        """`PASS  server  detail`, with ` — fix: …` when there is a fix."""
        text = f"{self.verdict.value}  {self.name.value}  {self.detail}"
        return f"{text} — fix: {self.fix}" if self.fix and self.verdict is not CheckVerdict.PASS else text


def one_line(text: str) -> str:
    """Text on one line: line breaks and tabs become spaces, other control characters are dropped, runs of
    spaces collapse."""
    cleaned = "".join(" " if c in "\r\n\t" else c for c in text if c.isprintable() or c in "\r\n\t")
    return " ".join(cleaned.split())


def exit_code(checks: Iterable[Check]) -> int:
    """0 when nothing failed (warnings allowed), 1 otherwise."""
    return 1 if any(c.verdict is CheckVerdict.FAIL for c in checks) else 0


def summary(checks: Sequence[Check]) -> str:
    """One line: how many passed, warned and failed, and whether the talk can go ahead."""
    counts = {v: sum(1 for c in checks if c.verdict is v) for v in CheckVerdict}
    head = f"{counts[CheckVerdict.PASS]} passed, {counts[CheckVerdict.WARN]} warned, {counts[CheckVerdict.FAIL]} failed"
    if counts[CheckVerdict.FAIL]:
        failed = ", ".join(c.name.value for c in checks if c.verdict is CheckVerdict.FAIL)
        return f"{head}: fix {failed} before the talk"
    if counts[CheckVerdict.WARN]:
        return f"{head}: ready, read the warnings"
    return f"{head}: ready"


# ---- the GPU -----------------------------------------------------------------------------------------------

CPU_NOTE = "runs on the CPU: numbers are small, the story is the same"


def gpu_check(name: str | None, memory_mib: float | None, unavailable_reason: str) -> Check:
    """PASS with the GPU's name and memory; WARN without an NVIDIA GPU (the demo runs on the CPU)."""
    if name is not None:
        memory = f", {memory_mib / 1024:.1f} GiB" if memory_mib is not None and math.isfinite(memory_mib) else ""
        return Check(CheckName.GPU, CheckVerdict.PASS, f"{name}{memory}")
    why = unavailable_reason.split(" — ")[0].strip() or "No NVIDIA GPU found"
    return Check(CheckName.GPU, CheckVerdict.WARN, f"{why}; {CPU_NOTE}",
                 "nothing to do for the demo; for real figures use a machine with an NVIDIA GPU and its driver")


# ---- the screen ----------------------------------------------------------------------------------------------

# What the presenter view needs, in logical pixels: 1280x720 at --scale 1.5 (853x480) must read.
SCREEN_PASS = (800, 450)
SCREEN_FAIL = (640, 360)  # below this the view's figures overlap: clearly unusable


@dataclass(frozen=True)
class ScreenFacts:
    """The primary screen as Qt sees it: its size in logical pixels (the scale applied) and the platform."""

    width: int  # logical pixels
    height: int
    scale: float = 1.0  # QT_SCALE_FACTOR / --scale
    platform: str = ""  # Qt's platform plugin, e.g. "xcb", "wayland", "offscreen"
    name: str = ""  # the screen's name, e.g. "HDMI-1"

    @property
    def physical(self) -> tuple[int, int]:
        """The size at scale 1 (what the projector shows)."""
        return round(self.width * self.scale), round(self.height * self.scale)

    @property
    def offscreen(self) -> bool:
        return self.platform in ("offscreen", "minimal")


def screen_check(facts: ScreenFacts | None) -> Check:
    """PASS from 800x450 logical pixels up (1280x720 at scale 1.5), WARN below or without a real screen, FAIL
    below 640x360."""
    if facts is None:
        return Check(CheckName.SCREEN, CheckVerdict.FAIL, "no screen found",
                     "connect a screen or projector and run the pre-flight again on it")
    w, h = facts.width, facts.height
    pw, ph = facts.physical
    size = f"{w}x{h} logical pixels" + (f" ({pw}x{ph} at scale {facts.scale:g})" if facts.scale != 1 else "")
    if facts.offscreen:
        return Check(CheckName.SCREEN, CheckVerdict.WARN,
                     f"no real screen: Qt's {facts.platform} platform ({size})",
                     "run the pre-flight on the desktop with the projector connected")
    if w < SCREEN_FAIL[0] or h < SCREEN_FAIL[1]:
        return Check(CheckName.SCREEN, CheckVerdict.FAIL,
                     f"{facts.name or 'the screen'} is {size}; the presenter view needs {SCREEN_PASS[0]}x"
                     f"{SCREEN_PASS[1]}", "use a larger resolution, or a smaller --scale")
    if w < SCREEN_PASS[0] or h < SCREEN_PASS[1]:
        return Check(CheckName.SCREEN, CheckVerdict.WARN,
                     f"{facts.name or 'the screen'} is {size}; below {SCREEN_PASS[0]}x{SCREEN_PASS[1]} the "
                     "presenter view's figures crowd", "a smaller --scale, or a larger resolution")
    return Check(CheckName.SCREEN, CheckVerdict.PASS, f"{facts.name or 'the screen'} is {size}")


# ---- the fonts ------------------------------------------------------------------------------------------------

# The Unicode name's first word -> the script a person calls it, for the scripts a demo's text is likely in.
_SCRIPT_WORDS = {"CJK": "Chinese (Han)", "HIRAGANA": "Japanese (kana)", "KATAKANA": "Japanese (kana)",
                 "HANGUL": "Korean (Hangul)", "ARABIC": "Arabic", "HEBREW": "Hebrew", "CYRILLIC": "Cyrillic",
                 "GREEK": "Greek", "DEVANAGARI": "Devanagari", "THAI": "Thai"}
_CJK_SCRIPTS = frozenset({"Chinese (Han)", "Japanese (kana)", "Korean (Hangul)"})


def script_of(char: str) -> str:
    """The writing system a character belongs to, as a person names it ("Chinese (Han)", "Latin", "symbols")."""
    name = unicodedata.name(char, "")
    if name.startswith(("CJK", "IDEOGRAPHIC", "FULLWIDTH")) or "IDEOGRAPH" in name:
        return "Chinese (Han)"
    first = name.split(" ")[0] if name else ""
    if first in _SCRIPT_WORDS:
        return _SCRIPT_WORDS[first]
    if first == "LATIN" or char.isascii():
        return "Latin"
    return "symbols"


def shown_characters(text: str) -> str:
    """The distinct characters of `text` a font must draw (no spaces or control characters), in first-seen
    order."""
    seen: dict[str, None] = {}
    for char in text:
        if char.isprintable() and not char.isspace():
            seen.setdefault(char, None)
    return "".join(seen)


def step_prompt(step: DemoStep, presets: Sequence[Preset] = BUILTIN_PRESETS) -> str:
    """The text a step sends: its own prompt, else its preset's (the user's presets first, then the built-in
    ones); '' when it sends none or names a preset that does not exist."""
    if not step.sends_prompts:
        return ""
    if step.prompt:
        return step.prompt
    for preset in (*presets, *BUILTIN_PRESETS):
        if preset.key == step.preset:
            return preset.prompt
    return ""


def script_text(script: DemoScript, presets: Sequence[Preset] = BUILTIN_PRESETS) -> str:
    """Everything the script shows: its title, each step's title and words, and the prompts it sends."""
    parts = [script.title]
    for step in script.steps:
        parts += [step.title, step.says, step_prompt(step, presets)]
    return "\n".join(parts)


@dataclass(frozen=True)
class FontCoverage:
    """What the fonts on this machine draw of a text: the font Qt picks for it, the fallback fonts that draw
    what that one lacks, and the characters no installed font draws."""

    family: str
    fallbacks: tuple[str, ...] = ()
    missing: str = ""  # characters nothing draws (each once)
    checked: int = 0  # distinct characters checked


def fix_for_fonts(scripts: Iterable[str]) -> str:
    """The install command for fonts covering `scripts`."""
    if set(scripts) & _CJK_SCRIPTS:
        return ("install a CJK font: `sudo apt install fonts-noto-cjk` (Fedora: `sudo dnf install "
                "google-noto-sans-cjk-fonts`), then restart ollama-deck")
    return "install the Noto fonts: `sudo apt install fonts-noto` (Fedora: `sudo dnf install google-noto-fonts`)"


def fonts_check(coverage: FontCoverage) -> Check:
    """PASS when every character the script shows is drawn by some font here (naming a fallback's part), FAIL
    naming the scripts of the missing characters and the install command."""
    if coverage.missing:
        scripts = sorted({script_of(c) for c in coverage.missing})
        sample = coverage.missing[:8] + ("…" if len(coverage.missing) > 8 else "")
        return Check(CheckName.FONTS, CheckVerdict.FAIL,
                     f"no font here draws {len(coverage.missing)} of the script's {coverage.checked} characters "
                     f"({', '.join(scripts)}: {sample}); they would show as empty boxes",
                     fix_for_fonts(scripts))
    if coverage.fallbacks:
        return Check(CheckName.FONTS, CheckVerdict.PASS,
                     f"all {coverage.checked} characters drawn: {coverage.family}, with "
                     f"{', '.join(coverage.fallbacks)} for what it lacks")
    return Check(CheckName.FONTS, CheckVerdict.PASS, f"all {coverage.checked} characters drawn by {coverage.family}")


# ---- the time the script takes ----------------------------------------------------------------------------------

RESTART_ALLOWANCE_S = 15.0  # a guarded apply restarts the server: loading a model again, on a laptop
SLOW_STEP_S = 60.0  # a step the room waits longer for than this is worth a warning


@dataclass(frozen=True)
class StepRate:
    """One measured reply: time to first token (s) and decode rate (tokens/s)."""

    ttft_s: float
    decode_tps: float

    def __post_init__(self) -> None:
        if not (math.isfinite(self.ttft_s) and self.ttft_s >= 0):
            raise ValueError(f"time to first token must be a finite, non-negative number of seconds, not {self.ttft_s}")
        if not (math.isfinite(self.decode_tps) and self.decode_tps > 0):
            raise ValueError(f"the decode rate must be a finite, positive number of tokens/s, not {self.decode_tps}")

    def reply_s(self, tokens: int) -> float:
        """One reply of `tokens` tokens, on its own."""
        return self.ttft_s + tokens / self.decode_tps


def step_seconds(step: DemoStep, rate: StepRate, restart_s: float = RESTART_ALLOWANCE_S) -> float:
    """A step's time at `rate`, counted without any gain from batching (so an upper bound, as a speaker wants):
    a prompt is one reply; a burst is its users' tokens one after the other; parallel is that for each value,
    after a restart; an A/B is two replies; a sweep is its points' restarts and requests (also when it may show
    a kept run instead: whether there is one for the model on stage is not known here); a note takes none."""
    tokens = step.max_tokens
    match step.action:
        case StepAction.PROMPT:
            return rate.reply_s(tokens)
        case StepAction.BURST:
            return rate.ttft_s + step.users * tokens / rate.decode_tps
        case StepAction.PARALLEL:
            return len(step.values) * (restart_s + rate.ttft_s + step.users * tokens / rate.decode_tps)
        case StepAction.AB:
            return 2 * rate.reply_s(tokens)
        case StepAction.SWEEP:
            return len(step.parallel) * (restart_s + rate.ttft_s + step.requests * tokens / rate.decode_tps)
        case _:
            return 0.0


@dataclass(frozen=True)
class ScriptEstimate:
    """The script's time at a measured rate: each step's (s) and the total."""

    steps: tuple[float, ...]
    budget_s: float  # the script's minutes, in seconds

    @property
    def total_s(self) -> float:
        return sum(self.steps)

    @property
    def slowest(self) -> int:
        """The index of the longest step (0 for an empty estimate)."""
        return max(range(len(self.steps)), key=lambda i: self.steps[i]) if self.steps else 0

    @property
    def fits(self) -> bool:
        return self.total_s <= self.budget_s


def estimate_script(script: DemoScript, rate: StepRate, restart_s: float = RESTART_ALLOWANCE_S) -> ScriptEstimate:
    """Each step's time at `rate` (see step_seconds) and the talk's budget."""
    return ScriptEstimate(tuple(step_seconds(s, rate, restart_s) for s in script.steps), script.minutes * 60.0)


def first_prompt_step(script: DemoScript) -> int | None:
    """The index of the first step that sends a prompt of its own, None when none does."""
    return next((i for i, s in enumerate(script.steps) if s.sends_prompts), None)


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.1f} min"


def step_time_check(script: DemoScript, rate: StepRate, measured_tokens: int,
                    restart_s: float = RESTART_ALLOWANCE_S) -> Check:
    """PASS when the script's estimate fits its minutes; WARN when a step takes longer than a minute or the whole
    does not fit."""
    estimate = estimate_script(script, rate, restart_s)
    fact = (f"{measured_tokens} tokens: TTFT {rate.ttft_s * 1000:.0f} ms, {rate.decode_tps:.1f} tok/s; the script "
            f"takes about {_duration(estimate.total_s)} of its {script.minutes:g} min (without batching gains)")
    slow = [i for i, s in enumerate(estimate.steps) if s > SLOW_STEP_S]
    if slow:
        i = estimate.slowest
        return Check(CheckName.STEP_TIME, CheckVerdict.WARN,
                     f"{fact}; step {i + 1} ({script.steps[i].title}) alone takes about {_duration(estimate.steps[i])}",
                     "lower that step's max_tokens, users or requests in the script, or use a faster model or GPU")
    if not estimate.fits:
        return Check(CheckName.STEP_TIME, CheckVerdict.WARN, fact,
                     "shorten the script (fewer steps, smaller max_tokens), or raise its minutes")
    return Check(CheckName.STEP_TIME, CheckVerdict.PASS, fact)


__all__ = ["CPU_NOTE", "Check", "CheckName", "CheckVerdict", "FontCoverage", "RESTART_ALLOWANCE_S", "SCREEN_FAIL",
           "SCREEN_PASS", "SLOW_STEP_S", "ScreenFacts", "ScriptEstimate", "StepRate", "estimate_script", "exit_code",
           "first_prompt_step", "fix_for_fonts", "fonts_check", "gpu_check", "one_line", "screen_check",
           "script_of", "script_text", "shown_characters", "step_prompt", "step_seconds", "step_time_check",
           "summary"]
