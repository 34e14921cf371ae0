"""What a benchmark workload sends: prompts, arrival pattern, stop rule, output length, thinking.

A LoadPlan is pure data; the load generator (app/services/bench/loadgen.py) executes it. Prompts come
from the prompt console's presets (app.core.console.presets) or from a file the user picks; the first
counted request is request 0 after the warm-up, and request i uses prompt i modulo the set.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any
from collections.abc import Iterable, Sequence

from app.core.bench.scenario import Scenario, ScenarioError, parse_scenario_data
from app.core.console.presets import BUILTIN_PRESETS, Preset
from app.core.units import MIB
from app.core.replies import ChatRequest

LOOP_MODES = ("closed", "open")
DEFAULT_NUM_PREDICT = 256
DEFAULT_SEED = 1234
MIN_REQUESTS = 8  # fewer make percentiles meaningless
MAX_PROMPT_FILE_BYTES = 4 * MIB
# The seed article's workload: one fixed content-generation prompt, timed at each batch size.
DEFAULT_PROMPT_SET = "ai-trends-essay-zh"


@dataclass(frozen=True)
class BenchPrompt:
    """One prompt of a workload: chat messages (system prompt first if any)."""

    name: str
    text: str
    system: str = ""
    # The tokens its maker expects the server to count for `text` alone (None: not made to a length).
    expected_tokens: int | None = None

    def messages(self) -> list[dict[str, str]]:
        """The chat messages of this prompt (role and content), the system prompt first."""
        out = [{"role": "system", "content": self.system}] if self.system else []
        out.append({"role": "user", "content": self.text})
        return out


class PromptFileError(ValueError):
    """A prompt file that cannot be used; the message says what to fix."""


def prompts_from_presets(presets: Iterable[Preset]) -> tuple[BenchPrompt, ...]:
    """Console presets as workload prompts (their think and num_predict are the workload's to set)."""
    return tuple(BenchPrompt(p.title, p.prompt, p.system) for p in presets if p.prompt.strip())


def prompt_sets(presets: Sequence[Preset] = BUILTIN_PRESETS) -> dict[str, tuple[BenchPrompt, ...]]:
    """Named prompt sets for the editor: each preset alone, and all of them mixed ("mixed")."""
    sets = {p.key: prompts_from_presets([p]) for p in presets if p.prompt.strip()}
    mixed = prompts_from_presets(presets)
    if len(mixed) > 1:
        sets["mixed"] = mixed
    return sets


def parse_prompt_file(text: str, source: str = "the prompt file") -> tuple[BenchPrompt, ...]:
    """Prompts from a file: JSON Lines ({"prompt": …} or {"messages": […]}), a JSON array of strings or
    such objects, or plain text with one prompt per line. Raises PromptFileError saying what to fix."""
    stripped = text.strip()
    if not stripped:
        raise PromptFileError(f"{source} is empty: write one prompt per line, or JSON Lines with a \"prompt\" field.")
    if stripped.startswith("["):
        try:
            items = json.loads(stripped)
        except ValueError as exc:
            raise PromptFileError(f"{source} starts with '[' but is not a JSON array: {exc}.") from None
        return _prompts_from_items(items, source)
    lines = [line for line in stripped.splitlines() if line.strip()]
    if all(line.lstrip().startswith("{") for line in lines):
        items = []
        for number, line in enumerate(lines, start=1):
            try:
                items.append(json.loads(line))
            except ValueError as exc:
                raise PromptFileError(f"{source}, line {number}: not valid JSON ({exc}).") from None
        return _prompts_from_items(items, source)
    return tuple(BenchPrompt(f"line {i}", line.strip()) for i, line in enumerate(lines, start=1))


def _prompts_from_items(items: Any, source: str) -> tuple[BenchPrompt, ...]:
    if not isinstance(items, list) or not items:
        raise PromptFileError(f"{source} holds no prompts.")
    out = []
    for number, item in enumerate(items, start=1):
        where = f"{source}, entry {number}"
        if isinstance(item, str) and item.strip():
            out.append(BenchPrompt(f"entry {number}", item.strip()))
            continue
        if not isinstance(item, dict):
            raise PromptFileError(f"{where}: expected text or an object with \"prompt\", got {type(item).__name__}.")
        name = str(item.get("name") or f"entry {number}")
        if isinstance(item.get("prompt"), str) and item["prompt"].strip():
            out.append(BenchPrompt(name, item["prompt"], str(item.get("system") or "")))
            continue
        messages = item.get("messages")
        if isinstance(messages, list) and messages:
            user = [m.get("content") for m in messages if isinstance(m, dict) and m.get("role") == "user"]
            system = [m.get("content") for m in messages if isinstance(m, dict) and m.get("role") == "system"]
            if user and isinstance(user[-1], str) and user[-1].strip():
                out.append(BenchPrompt(name, user[-1], system[0] if system and isinstance(system[0], str) else ""))
                continue
        raise PromptFileError(f"{where}: needs a non-empty \"prompt\" (or \"messages\" with a user turn).")
    return tuple(out)


@dataclass(frozen=True)
class LoadPlan:
    """One workload against one server setting.

    closed loop: `concurrency` clients, each sending its next request when its last one ended.
    open loop: requests arrive as a Poisson process at `rate_rps`; `concurrency` caps how many are
    in flight (0 = no cap), and an arrival beyond the cap waits on the client, which counts in
    its latency (latency is measured from the arrival, so a slow server cannot hide queueing).
    Stop rule: `requests` counted requests, or issuing stops after `duration_s` seconds.
    """

    model: str
    prompts: tuple[BenchPrompt, ...] = field(default_factory=lambda: prompt_sets()[DEFAULT_PROMPT_SET])
    mode: str = "closed"
    concurrency: int = 1
    rate_rps: float = 0.0
    requests: int | None = 32
    duration_s: float | None = None
    requests_per_client: int | None = None  # instead of `requests`: this many per client (at least MIN_REQUESTS)
    warmup_requests: int | None = None  # None: one per client (every decode slot warmed once)
    num_predict: int | None = DEFAULT_NUM_PREDICT
    think: bool | str | None = False
    seed: int = DEFAULT_SEED
    request_timeout_s: float = 600.0
    # A scenario instead of `prompts`, `mode`, `rate_rps`, `num_predict` and `think`: its classes say what is
    # sent and when; `concurrency` then caps the requests in flight across classes (0 = no cap) and
    # `requests` is split over the classes.
    scenario: Scenario | None = None

    def replace(self, **changes: Any) -> LoadPlan:
        """A copy with some fields changed."""
        return replace(self, **changes)

    @property
    def warmup_count(self) -> int:
        """Requests sent before measuring (never counted)."""
        if self.warmup_requests is not None:
            return max(0, self.warmup_requests)
        if self.scenario is not None:
            return len(self.scenario.classes)  # one request of each class
        return max(1, self.concurrency) if self.mode == "closed" else max(1, min(self.concurrency or 1, 4))

    @property
    def output_cap(self) -> int | None:
        """The output cap requests are sent with (a scenario's largest; None: uncapped)."""
        return self.scenario.output_cap if self.scenario is not None else self.num_predict

    def problems(self) -> list[str]:
        """What makes this plan unusable, in words; empty when it can run."""
        out = []
        if not self.model.strip():
            out.append("Choose a model.")
        if not self.prompts:
            out.append("The prompt set is empty.")
        if self.scenario is not None:
            return out + self._scenario_problems()
        if self.mode not in LOOP_MODES:
            out.append(f"Load must be closed or open loop, not {self.mode!r}.")
        if self.mode == "closed" and not 1 <= self.concurrency <= 1024:
            out.append("Concurrent clients must be between 1 and 1024.")
        if self.mode == "open" and not 0 < self.rate_rps <= 10_000:
            out.append("An open-loop rate must be between 0 and 10000 requests per second.")
        if self.mode == "open" and not 0 <= self.concurrency <= 1024:
            out.append("The in-flight cap must be between 0 (none) and 1024.")
        rules = [x is not None for x in (self.requests, self.duration_s, self.requests_per_client)]
        if sum(rules) != 1:
            out.append("Stop after a number of requests or a duration, not both or neither.")
        if self.requests_per_client is not None and self.requests_per_client < 1:
            out.append("Send at least one request per client.")
        if self.requests is not None and self.requests < 1:
            out.append("Send at least one request per point.")
        if self.duration_s is not None and self.duration_s <= 0:
            out.append("The duration must be positive.")
        if self.num_predict is not None and self.num_predict < 1:
            out.append("Output tokens (num_predict) must be at least 1, or unlimited.")
        if self.request_timeout_s <= 0:
            out.append("The request timeout must be positive.")
        return out

    def _scenario_problems(self) -> list[str]:
        out = []
        if not 0 <= self.concurrency <= 1024:
            out.append("The in-flight cap must be between 0 (none) and 1024.")
        if (self.requests is None) == (self.duration_s is None) or self.requests_per_client is not None:
            out.append("Stop a scenario after a number of requests or a duration, not both or neither.")
        if self.requests is not None and self.requests < 1:
            out.append("Send at least one request per point.")
        if self.duration_s is not None and self.duration_s <= 0:
            out.append("The duration must be positive.")
        if self.request_timeout_s <= 0:
            out.append("The request timeout must be positive.")
        return out

    def for_point(self, concurrency: int) -> LoadPlan:
        """This workload with `concurrency` clients (or in-flight cap), its request count settled."""
        plan = replace(self, concurrency=concurrency)
        if self.requests_per_client is not None:
            plan = replace(plan, requests=max(MIN_REQUESTS, self.requests_per_client * max(concurrency, 1)),
                           requests_per_client=None)
        return plan

    def prompt_for(self, index: int) -> BenchPrompt:
        """The prompt of request `index` (prompts cycle)."""
        return self.prompts[index % len(self.prompts)]

    def chat_request(self, index: int) -> ChatRequest:
        """Request `index`: seeded, capped, and with no context size of its own (that would make the
        server reload the model with another context than its setting)."""
        return ChatRequest(model=self.model, messages=tuple(self.prompt_for(index).messages()),
                           think=self.think, seed=self.seed + index, max_tokens=self.num_predict)

    def describe(self, per_point_clients: bool = False) -> str:
        """One line for tables and reports, e.g. "closed loop, 8 clients, 32 requests, 256 output tokens, no
        thinking"; per_point_clients when a sweep sets the clients (or in-flight cap) per point."""
        if self.scenario is not None:
            cap = (", in-flight cap per point" if per_point_clients
                   else f", at most {self.concurrency} in flight" if self.concurrency else "")
            stop = f"{self.requests} requests" if self.requests is not None else f"{self.duration_s:g} s"
            return f"{self.scenario.describe()}{cap}, {stop}"
        if self.mode == "closed" and per_point_clients:
            load = "closed loop, clients per point"
        elif self.mode == "closed":
            load = f"closed loop, {self.concurrency} client{'s' if self.concurrency != 1 else ''}"
        else:
            cap = (", in-flight cap per point" if per_point_clients
                   else f", at most {self.concurrency} in flight" if self.concurrency else "")
            load = f"open loop, {self.rate_rps:g} req/s Poisson{cap}"
        if self.requests_per_client is not None:
            stop = f"{self.requests_per_client} requests per client (at least {MIN_REQUESTS})"
        else:
            stop = f"{self.requests} requests" if self.requests is not None else f"{self.duration_s:g} s"
        out = f"{self.num_predict} output tokens" if self.num_predict is not None else "uncapped output"
        words: dict[bool | str | None, str] = {None: "model's default thinking", True: "thinking on",
                                               False: "no thinking"}
        think = words.get(
            self.think, f"thinking {self.think}")
        return f"{load}, {stop}, {out}, {think}"

    def to_json(self) -> dict[str, Any]:
        """Plain dict for the history and exports."""
        return {"model": self.model, "mode": self.mode, "concurrency": self.concurrency,
                "rate_rps": self.rate_rps, "requests": self.requests, "duration_s": self.duration_s,
                "requests_per_client": self.requests_per_client,
                "warmup_requests": self.warmup_requests, "num_predict": self.num_predict,
                "think": self.think, "seed": self.seed, "request_timeout_s": self.request_timeout_s,
                "prompts": [_prompt_json(p) for p in self.prompts],
                **({"scenario": self.scenario.to_json()} if self.scenario is not None else {})}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LoadPlan:
        """Inverse of to_json (unknown keys ignored)."""
        prompts = tuple(BenchPrompt(str(p.get("name", "")), str(p.get("text", "")), str(p.get("system", "")),
                                    _saved_count(p.get("expected_tokens")))
                        for p in data.get("prompts") or [])
        known = {k: data[k] for k in ("mode", "concurrency", "rate_rps", "requests", "duration_s", "requests_per_client",
                                      "warmup_requests", "num_predict", "think", "seed",
                                      "request_timeout_s") if k in data}
        return cls(model=str(data.get("model", "")), prompts=prompts, scenario=_saved_scenario(data.get("scenario")),
                   **known)


def _saved_scenario(data: Any) -> Scenario | None:
    """A run's scenario as saved; None when it ran without one (or what was saved cannot be read back)."""
    if data is None:
        return None
    try:
        return parse_scenario_data(data, "the saved scenario")
    except ScenarioError:
        return None


def _prompt_json(p: BenchPrompt) -> dict[str, Any]:
    out: dict[str, Any] = {"name": p.name, "text": p.text, "system": p.system}
    if p.expected_tokens is not None:
        out["expected_tokens"] = p.expected_tokens
    return out


def _saved_count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


__all__ = ["BenchPrompt", "DEFAULT_NUM_PREDICT", "DEFAULT_PROMPT_SET", "LOOP_MODES", "LoadPlan",
           "PromptFileError", "parse_prompt_file", "prompt_sets", "prompts_from_presets"]
