"""A scripted demo: a short list of steps a presenter advances with one key, each saying on screen what the
audience is seeing.

A script is TOML (see `parse_script`); the app ships one (`builtin`), and a presenter writes their own. Every
step names one action the app already knows how to do — a prompt, a burst of users, a guarded apply of
parallel values compared under the same burst, a thinking A/B, a short sweep's verdict — so a script cannot
ask for anything the app's pages could not do by hand.

    title = "A local model under load"
    minutes = 5                          # the talk's budget: pre-flight says whether the script fits

    [[step]]
    title = "One user"
    says = "One request streams: tokens per second and time to first token."
    action = "prompt"
    preset = "ai-trends-essay-zh"        # or prompt = "…"
    max_tokens = 96

    [[step]]
    title = "Eight users now"
    says = "Eight people ask at once: the server batches them."
    action = "burst"
    users = 8

Fields per action (anything else in a step is refused with its name):
- every step: `title`, `says` (both required), `action`, `timeout_s` (the step is stopped and failed after it)
- prompt: `prompt` or `preset`, `max_tokens`, `think`
- burst: the same and `users`
- parallel: the same as burst and `values` (the parallel requests to apply in turn, e.g. [1, 8])
- ab: `prompt` or `preset`, `max_tokens` (thinking with and without)
- sweep: `parallel` (the values to sweep), `requests` (per point), `max_tokens`, `use_history` (show the newest
  kept run of this model instead, when there is one)
- note: nothing else (a caption only)
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

MAX_STEPS = 40
MAX_USERS = 64
MAX_PARALLEL = 64
MAX_TOKENS = 4096
MAX_TITLE_CHARS = 60
MAX_SAYS_CHARS = 240
MIN_TIMEOUT_S = 5.0
MAX_TIMEOUT_S = 1800.0
DEFAULT_TIMEOUT_S = 180.0
DEFAULT_MAX_TOKENS = 128
DEFAULT_USERS = 8
DEFAULT_PRESET = "ai-trends-essay-zh"
DEFAULT_MINUTES = 5.0
MAX_SWEEP_REQUESTS = 256


class StepAction(StrEnum):
    """What a step does."""

    PROMPT = "prompt"  # one user: one streamed reply
    BURST = "burst"  # `users` copies of one prompt at once
    PARALLEL = "parallel"  # for each of `values`: apply parallel=value (guarded, a restart), then the burst
    AB = "ab"  # the same prompt with thinking and without
    SWEEP = "sweep"  # a short parallel sweep (or the newest kept run) and its recommendation
    NOTE = "note"  # a caption only


# The fields each action takes besides the common ones.
_COMMON = frozenset({"title", "says", "action", "timeout_s"})
_PROMPT_FIELDS = frozenset({"prompt", "preset", "max_tokens", "think"})
ACTION_FIELDS: dict[StepAction, frozenset[str]] = {
    StepAction.PROMPT: _PROMPT_FIELDS,
    StepAction.BURST: _PROMPT_FIELDS | {"users"},
    StepAction.PARALLEL: _PROMPT_FIELDS | {"users", "values"},
    StepAction.AB: frozenset({"prompt", "preset", "max_tokens"}),
    StepAction.SWEEP: frozenset({"parallel", "requests", "max_tokens", "use_history"}),
    StepAction.NOTE: frozenset(),
}


class ScriptError(ValueError):
    """A script that cannot be used; the message names the step, the field, the value and what is allowed."""


@dataclass(frozen=True)
class DemoStep:
    """One step of a script (see the module's text for the fields each action uses)."""

    title: str
    says: str
    action: StepAction
    prompt: str = ""  # the text to send; empty: `preset`'s
    preset: str = ""  # a test prompt's key (the Prompt page's built-in presets)
    max_tokens: int = DEFAULT_MAX_TOKENS
    think: bool = False
    users: int = 1
    values: tuple[int, ...] = ()  # PARALLEL: the parallel requests applied in turn
    parallel: tuple[int, ...] = ()  # SWEEP: the parallel values swept
    requests: int = 8  # SWEEP: counted requests per point
    use_history: bool = False  # SWEEP: the newest kept run of this model, when there is one
    timeout_s: float = DEFAULT_TIMEOUT_S

    @property
    def sends_prompts(self) -> bool:
        """True when the step sends a prompt of its own (its text must be readable on screen)."""
        return self.action in (StepAction.PROMPT, StepAction.BURST, StepAction.PARALLEL, StepAction.AB)

    @property
    def changes_server(self) -> bool:
        """True when the step restarts the server with other settings (puts them back after, or on reset)."""
        return self.action is StepAction.PARALLEL or (self.action is StepAction.SWEEP and not self.use_history)


@dataclass(frozen=True)
class DemoScript:
    """A titled list of steps and the talk's time budget."""

    title: str
    steps: tuple[DemoStep, ...]
    minutes: float = DEFAULT_MINUTES
    source: str = ""  # where it was read from ("builtin", a path)

    def step(self, index: int) -> DemoStep:
        return self.steps[index]

    def __len__(self) -> int:
        return len(self.steps)


class StepState(StrEnum):
    """Where a step stands."""

    WAITING = "waiting"  # not run yet
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"  # it could not do what it says; `StepResult.reason` says why in one line
    STOPPED = "stopped"  # Esc, a reset or its timeout stopped it


class StepFailure(StrEnum):
    """Why a step failed, as a kind (the one-line reason says it for the audience)."""

    NO_SERVER = "no_server"  # nothing answers, or the server is not running
    NO_MODEL = "no_model"  # no model to send to
    CANNOT_THINK = "cannot_think"  # an A/B on a model without the thinking capability
    CANNOT_APPLY = "cannot_apply"  # the server cannot be re-configured (attached, held, refused, rolled back)
    REQUESTS_FAILED = "requests_failed"  # every request of the step failed
    SWEEP_FAILED = "sweep_failed"
    TIMED_OUT = "timed_out"
    UNAVAILABLE = "unavailable"  # the backend lacks the capability


@dataclass(frozen=True)
class StepResult:
    """How a step ended: its state, its headline figure in words ("41 tok/s across 8 users") and, when it did
    not do what it says, why in one line."""

    state: StepState
    headline: str = ""
    reason: str = ""
    failure: StepFailure | None = None
    figures: dict[str, float] = field(default_factory=dict)  # named results, e.g. {"parallel 1": 12.3}


def parse_script(text: str, source: str = "") -> DemoScript:
    """A script from TOML text; ScriptError names the first thing wrong in the user's terms."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ScriptError(f"{source or 'the script'} is not valid TOML: {exc}") from None
    return script_from_dict(data, source)


def script_from_dict(data: dict[str, Any], source: str = "") -> DemoScript:
    """A script from parsed TOML (see parse_script)."""
    where = source or "the script"
    unknown = sorted(set(data) - {"title", "minutes", "step"})
    if unknown:
        raise ScriptError(f"{where}: unknown field {unknown[0]!r}; a script has title, minutes and [[step]] tables")
    title = _text(data.get("title", "Demo"), "title", where, MAX_TITLE_CHARS)
    minutes = _number(data.get("minutes", DEFAULT_MINUTES), "minutes", where, 0.5, 120.0)
    raw_steps = data.get("step")
    if not isinstance(raw_steps, list) or not raw_steps:
        raise ScriptError(f"{where} has no steps: add [[step]] tables, each with a title, says and action")
    if len(raw_steps) > MAX_STEPS:
        raise ScriptError(f"{where} has {len(raw_steps)} steps; at most {MAX_STEPS}")
    steps = tuple(_step(raw, i + 1, where) for i, raw in enumerate(raw_steps))
    return DemoScript(title=title, steps=steps, minutes=minutes, source=source)


def _step(raw: Any, number: int, where: str) -> DemoStep:
    at = f"{where}, step {number}"
    if not isinstance(raw, dict):
        raise ScriptError(f"{at} is not a table")
    action_text = raw.get("action", "note")
    try:
        action = StepAction(str(action_text).strip().lower())
    except ValueError:
        raise ScriptError(f"{at}: action {action_text!r} is not one of "
                          + ", ".join(a.value for a in StepAction)) from None
    allowed = _COMMON | ACTION_FIELDS[action]
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise ScriptError(f"{at}: {unknown[0]!r} is not a field of a {action.value} step; it takes "
                          + ", ".join(sorted(allowed)))
    if "title" not in raw or "says" not in raw:
        raise ScriptError(f"{at}: every step needs a title and says (what the audience is seeing)")
    title = _text(raw["title"], "title", at, MAX_TITLE_CHARS)
    says = _text(raw["says"], "says", at, MAX_SAYS_CHARS)
    fields: dict[str, Any] = {"title": title, "says": says, "action": action}
    if "timeout_s" in raw:
        fields["timeout_s"] = _number(raw["timeout_s"], "timeout_s", at, MIN_TIMEOUT_S, MAX_TIMEOUT_S)
    if "prompt" in raw and "preset" in raw:
        raise ScriptError(f"{at}: give prompt or preset, not both")
    if "prompt" in raw:
        fields["prompt"] = _text(raw["prompt"], "prompt", at, 100_000)
    if "preset" in raw:
        fields["preset"] = _text(raw["preset"], "preset", at, 80)
    if action in (StepAction.PROMPT, StepAction.BURST, StepAction.PARALLEL, StepAction.AB) \
            and "prompt" not in raw and "preset" not in raw:
        fields["preset"] = DEFAULT_PRESET
    if "max_tokens" in raw:
        fields["max_tokens"] = _integer(raw["max_tokens"], "max_tokens", at, 1, MAX_TOKENS)
    if "think" in raw:
        if not isinstance(raw["think"], bool):
            raise ScriptError(f"{at}: think is true or false, not {raw['think']!r}")
        fields["think"] = raw["think"]
    if action in (StepAction.BURST, StepAction.PARALLEL):
        fields["users"] = _integer(raw.get("users", DEFAULT_USERS), "users", at, 1, MAX_USERS)
    if action is StepAction.PARALLEL:
        fields["values"] = _integers(raw.get("values", [1, 8]), "values", at, 1, MAX_PARALLEL, least=2)
    if action is StepAction.SWEEP:
        fields["parallel"] = _integers(raw.get("parallel", [1, 2, 4]), "parallel", at, 1, MAX_PARALLEL, least=1)
        fields["requests"] = _integer(raw.get("requests", 8), "requests", at, 1, MAX_SWEEP_REQUESTS)
        if "use_history" in raw:
            if not isinstance(raw["use_history"], bool):
                raise ScriptError(f"{at}: use_history is true or false, not {raw['use_history']!r}")
            fields["use_history"] = raw["use_history"]
    return DemoStep(**fields)


def _text(value: Any, name: str, at: str, limit: int) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ScriptError(f"{at}: {name} must be a non-empty text")
    text = value.strip()
    if len(text) > limit:
        raise ScriptError(f"{at}: {name} is {len(text)} characters; at most {limit} (a room reads it from afar)")
    return text


def _number(value: Any, name: str, at: str, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise ScriptError(f"{at}: {name} must be a number from {low:g} to {high:g}, not {value!r}")
    return float(value)


def _integer(value: Any, name: str, at: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ScriptError(f"{at}: {name} must be a whole number from {low} to {high}, not {value!r}")
    return value


def _integers(value: Any, name: str, at: str, low: int, high: int, *, least: int) -> tuple[int, ...]:
    if not isinstance(value, list) or len(value) < least or len(value) > 8:
        raise ScriptError(f"{at}: {name} must be a list of {least} to 8 whole numbers, e.g. [1, 8]")
    numbers = tuple(_integer(v, name, at, low, high) for v in value)
    if len(set(numbers)) != len(numbers):
        raise ScriptError(f"{at}: {name} lists a value twice: {list(numbers)}")
    return numbers
