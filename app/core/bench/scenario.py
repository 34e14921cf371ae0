"""Scenarios: a workload as users have it, a mix of request classes, each with its own lengths, arrivals,
conversations, thinking share, system prompt and latency targets.

A scenario is pure data; the load generator (app/services/bench/loadgen.py) executes it. Lengths are in
the server's tokens and may be fixed or drawn from a distribution; every draw comes from a random
generator seeded by (run seed, class, conversation, turn), so the same seed sends the same workload.
A class's `prompt_tokens` is the new user text of each turn; in a conversation each turn also carries
the history (earlier user texts and replies), so its prompt grows turn by turn.

Users write their own as TOML or JSON (see `parse_scenario`); `to_json` keeps a scenario with its runs.
"""

from __future__ import annotations

import json
import math
import random
import tomllib
from dataclasses import dataclass, field, replace
from typing import Any

from app.core.bench.stats import ClassTargets

ARRIVALS = ("poisson", "constant", "closed")
DISTRIBUTIONS = ("fixed", "normal", "uniform")
MAX_TOKENS = 1 << 20
MAX_RATE_RPS = 10_000.0
MAX_CONCURRENCY = 1024
MAX_TURNS = 100
MAX_CLASSES = 32
MIN_SCALE = 1e-4


class ScenarioError(ValueError):
    """A scenario that cannot be used; the message names the field, the value and what is allowed."""


@dataclass(frozen=True)
class Length:
    """A token count: fixed, normal (mean and sd, clipped to [low, high]) or uniform over [low, high]."""

    kind: str = "fixed"
    mean: float = 1.0
    sd: float = 0.0
    low: int = 1
    high: int = MAX_TOKENS

    @classmethod
    def fixed(cls, tokens: int) -> Length:
        """Always `tokens`."""
        return cls("fixed", float(tokens), 0.0, tokens, tokens)

    def sample(self, rng: random.Random) -> int:
        """One draw (at least 1)."""
        if self.kind == "fixed":
            value = self.mean
        elif self.kind == "normal":
            value = rng.gauss(self.mean, self.sd)
        else:
            value = rng.uniform(self.low, self.high)
        return max(1, min(self.high, max(self.low, round(value))))

    @property
    def average(self) -> float:
        """The expected value before clipping (fixed: the value; uniform: the middle)."""
        return (self.low + self.high) / 2 if self.kind == "uniform" else self.mean

    @property
    def upper(self) -> int:
        """The most a draw gives in practice: fixed, the value; uniform, its top; normal, three standard
        deviations above the mean (clipped to its top)."""
        if self.kind == "fixed":
            return max(1, round(self.mean))
        if self.kind == "normal":
            return max(1, min(self.high, math.ceil(self.mean + 3 * self.sd)))
        return max(1, self.high)

    def scaled(self, factor: float) -> Length:
        """Every figure times `factor` (at least one token)."""
        def tokens(x: float) -> int:
            return max(1, round(x * factor))

        if self.kind == "fixed":
            return Length.fixed(tokens(self.mean))
        return Length(self.kind, max(1.0, self.mean * factor), self.sd * factor, tokens(self.low),
                      max(tokens(self.low), tokens(self.high)) if self.high < MAX_TOKENS else MAX_TOKENS)

    def describe(self) -> str:
        """e.g. "80", "~80 (sd 20, 10–200)", "40–120"."""
        if self.kind == "fixed":
            return f"{self.mean:g}"
        if self.kind == "uniform":
            return f"{self.low}–{self.high}"
        bounds = f", {self.low}–{self.high}" if self.high < MAX_TOKENS else (f", ≥ {self.low}" if self.low > 1 else "")
        return f"~{self.mean:g} (sd {self.sd:g}{bounds})"

    def to_json(self) -> int | dict[str, Any]:
        """A plain int when fixed, else {"dist": …, …}."""
        if self.kind == "fixed":
            return int(self.mean)
        if self.kind == "uniform":
            return {"dist": "uniform", "min": self.low, "max": self.high}
        out: dict[str, Any] = {"dist": "normal", "mean": self.mean, "sd": self.sd, "min": self.low}
        if self.high < MAX_TOKENS:
            out["max"] = self.high
        return out


@dataclass(frozen=True)
class Arrival:
    """How a class's requests arrive: open loop at `rate_rps` (Poisson or evenly spaced), or a closed loop
    of `concurrency` clients, each sending its next request when its last reply ended."""

    kind: str = "poisson"
    rate_rps: float = 1.0
    concurrency: int = 1

    @property
    def open(self) -> bool:
        """True for an open loop (arrivals at a rate)."""
        return self.kind != "closed"

    def describe(self) -> str:
        """e.g. "1 req/s Poisson", "2 clients, closed loop"."""
        if self.kind == "closed":
            return f"{self.concurrency} client{'s' if self.concurrency != 1 else ''}, closed loop"
        return f"{self.rate_rps:g} req/s {'Poisson' if self.kind == 'poisson' else 'evenly spaced'}"

    def to_json(self) -> dict[str, Any]:
        """Plain dict."""
        if self.kind == "closed":
            return {"kind": "closed", "concurrency": self.concurrency}
        return {"kind": self.kind, "rate_rps": self.rate_rps}


@dataclass(frozen=True)
class RequestClass:
    """One kind of request in a scenario."""

    name: str
    prompt_tokens: Length  # new user text per turn (history comes on top from turn 2)
    output_tokens: Length  # the output cap sent with each request
    arrival: Arrival = field(default_factory=Arrival)
    turns: int = 1  # turns per conversation; each next turn carries the history
    thinking_share: float = 0.0  # share of requests sent with thinking on (the rest with it off)
    system: str = ""
    text: str = ""  # a fixed user text instead of one made to `prompt_tokens`
    share: float | None = None  # weight when a request count is split over classes (None: rate or clients)
    targets: ClassTargets = field(default_factory=ClassTargets)

    @property
    def weight(self) -> float:
        """This class's part of a request count: its share, else its rate (open) or clients (closed)."""
        if self.share is not None:
            return self.share
        return self.arrival.rate_rps if self.arrival.open else float(self.arrival.concurrency)

    def mean_prompt_tokens(self) -> float:
        """Average prompt over a conversation's turns, history included (the system prompt not counted)."""
        p, o, t = self.prompt_tokens.average, self.output_tokens.average, self.turns
        return p * (t + 1) / 2 + o * (t - 1) / 2

    def describe(self) -> str:
        """One line with the class's numbers."""
        prompt = f"{len(self.text)}-character fixed prompt" if self.text else f"{self.prompt_tokens.describe()} prompt tokens"
        parts = [f"{prompt} → {self.output_tokens.describe()} out", self.arrival.describe()]
        if self.turns > 1:
            parts.append(f"{self.turns}-turn conversations, ~{self.mean_prompt_tokens():.0f} prompt tokens on "
                         "average with the history")
        if self.thinking_share:
            parts.append(f"{self.thinking_share * 100:g} % thinking")
        if self.targets.any:
            parts.append("targets " + self.targets.describe())
        return f"{self.name}: " + ", ".join(parts)

    def to_json(self) -> dict[str, Any]:
        """Plain dict (the file format's keys)."""
        out: dict[str, Any] = {"name": self.name, "prompt_tokens": self.prompt_tokens.to_json(),
                               "output_tokens": self.output_tokens.to_json(), "arrival": self.arrival.to_json()}
        if self.turns != 1:
            out["turns"] = self.turns
        if self.thinking_share:
            out["thinking_share"] = self.thinking_share
        if self.system:
            out["system"] = self.system
        if self.text:
            out["text"] = self.text
        if self.share is not None:
            out["share"] = self.share
        targets = self.targets.to_json()
        if targets:
            out["targets"] = targets
        return out


@dataclass(frozen=True)
class Scenario:
    """A named mix of request classes; `scale` records a factor applied to every length (1: as written)."""

    name: str
    classes: tuple[RequestClass, ...]
    description: str = ""
    scale: float = 1.0

    def scaled(self, factor: float) -> Scenario:
        """Every prompt and output length times `factor` (fixed texts stay); `scale` records it."""
        if not MIN_SCALE <= factor <= 1.0:
            raise ScenarioError(f"the length scale must be between {MIN_SCALE:g} and 1, not {factor:g}")
        classes = tuple(replace(c, prompt_tokens=c.prompt_tokens.scaled(factor),
                                output_tokens=c.output_tokens.scaled(factor)) for c in self.classes)
        return replace(self, classes=classes, scale=self.scale * factor)

    def without_thinking(self) -> Scenario:
        """The scenario with every thinking share at 0 (for a server that cannot switch thinking)."""
        return replace(self, classes=tuple(replace(c, thinking_share=0.0) for c in self.classes))

    @property
    def output_cap(self) -> int:
        """The largest output cap its requests are sent with (see Length.upper)."""
        return max(c.output_tokens.upper for c in self.classes)

    def split(self, requests: int) -> tuple[int, ...]:
        """`requests` spread over the classes by weight (largest remainder), each at least one."""
        weights = [c.weight for c in self.classes]
        total = sum(weights) or 1.0
        n = max(requests, len(weights))
        exact = [n * w / total for w in weights]
        counts = [max(1, math.floor(x)) for x in exact]
        order = sorted(range(len(exact)), key=lambda i: (counts[i] - exact[i], i))
        i = 0
        while sum(counts) < n:
            counts[order[i % len(order)]] += 1
            i += 1
        while sum(counts) > n:  # the at-least-one rule overshot: take from the classes above one
            j = max((k for k in range(len(counts)) if counts[k] > 1), key=lambda k: (counts[k] - exact[k], k))
            counts[j] -= 1
        return tuple(counts)

    def describe(self) -> str:
        """One line: name, classes and the scale when not 1."""
        scale = f", lengths × {self.scale:g}" if self.scale != 1.0 else ""
        return f"scenario {self.name} ({len(self.classes)} class{'es' if len(self.classes) != 1 else ''}{scale})"

    def lines(self) -> list[str]:
        """The scenario in words, one class per line after the header."""
        head = self.describe() + (f": {self.description}" if self.description else "")
        return [head, *(f"  {c.describe()}" for c in self.classes)]

    def to_json(self) -> dict[str, Any]:
        """Plain dict; parse_scenario_data reads it back."""
        out: dict[str, Any] = {"name": self.name, "classes": [c.to_json() for c in self.classes]}
        if self.description:
            out["description"] = self.description
        if self.scale != 1.0:
            out["scaled_by"] = self.scale  # the lengths above are already scaled
        return out


def request_rng(seed: int, class_name: str, conversation: int, turn: int) -> random.Random:
    """The generator behind one request's draws: the same arguments always give the same draws."""
    return random.Random(f"{seed}:{class_name}:{conversation}:{turn}")


def request_seed(seed: int, class_name: str, conversation: int, turn: int) -> int:
    """The sampling seed sent with one request, and the seed of its made prompt text."""
    return request_rng(seed, class_name, conversation, turn).randrange(1 << 31)


# ---- parsing ------------------------------------------------------------------------------------------

def _number(data: dict[str, Any], key: str, where: str, low: float, high: float, default: float | None = None,
            integer: bool = False, above: bool = False) -> float:
    if key not in data:
        if default is None:
            raise ScenarioError(f"{where}.{key} is missing: give a number from {_figure(low)} to {_figure(high)}")
        return default
    value = data[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (integer and not isinstance(value, int)) \
            or not math.isfinite(value) or not (low < value if above else low <= value) or value > high:
        kind = "a whole number" if integer else "a number"
        bound = f"above {_figure(low)}" if above else f"from {_figure(low)}"
        raise ScenarioError(f"{where}.{key} = {value!r}: must be {kind} {bound} to {_figure(high)}")
    return value


def _figure(x: float) -> str:
    """A bound as written: whole numbers in full (1048576, not 1.04858e+06)."""
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def _text(data: dict[str, Any], key: str, where: str, default: str = "", max_chars: int = 100_000) -> str:
    value = data.get(key, default)
    if not isinstance(value, str) or len(value) > max_chars:
        raise ScenarioError(f"{where}.{key} = {str(value)[:40]!r}: must be text of at most {max_chars} characters")
    return value


def _no_unknown(data: dict[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise ScenarioError(f"{where}: unknown field {unknown[0]!r}; the fields are {', '.join(sorted(allowed))}")


def _length(value: Any, where: str) -> Length:
    if isinstance(value, int) and not isinstance(value, bool):
        if not 1 <= value <= MAX_TOKENS:
            raise ScenarioError(f"{where} = {value}: must be a token count from 1 to {MAX_TOKENS}")
        return Length.fixed(value)
    if not isinstance(value, dict):
        raise ScenarioError(f"{where} = {value!r}: give a token count, or a table with dist = "
                            f"{', '.join(repr(d) for d in DISTRIBUTIONS[1:])}")
    dist = value.get("dist", "normal" if "mean" in value else "uniform")
    if dist not in DISTRIBUTIONS[1:]:
        raise ScenarioError(f"{where}.dist = {dist!r}: must be one of {', '.join(DISTRIBUTIONS[1:])}")
    if dist == "uniform":
        _no_unknown(value, {"dist", "min", "max"}, where)
        low = int(_number(value, "min", where, 1, MAX_TOKENS, integer=True))
        high = int(_number(value, "max", where, 1, MAX_TOKENS, integer=True))
        if high < low:
            raise ScenarioError(f"{where}.max = {high}: must be at least min ({low})")
        return Length("uniform", (low + high) / 2, 0.0, low, high)
    _no_unknown(value, {"dist", "mean", "sd", "min", "max"}, where)
    mean = _number(value, "mean", where, 1, MAX_TOKENS)
    sd = _number(value, "sd", where, 0, MAX_TOKENS, default=0.0)
    low = int(_number(value, "min", where, 1, MAX_TOKENS, default=1, integer=True))
    high = int(_number(value, "max", where, 1, MAX_TOKENS, default=MAX_TOKENS, integer=True))
    if high < low:
        raise ScenarioError(f"{where}.max = {high}: must be at least min ({low})")
    return Length("normal", float(mean), float(sd), low, high)


def _arrival(value: Any, where: str) -> Arrival:
    if not isinstance(value, dict):
        raise ScenarioError(f"{where} = {value!r}: give a table with kind = {', '.join(repr(a) for a in ARRIVALS)}")
    kind = value.get("kind", "poisson")
    if kind not in ARRIVALS:
        raise ScenarioError(f"{where}.kind = {kind!r}: must be one of {', '.join(ARRIVALS)}")
    if kind == "closed":
        _no_unknown(value, {"kind", "concurrency"}, where)
        return Arrival("closed", 0.0, int(_number(value, "concurrency", where, 1, MAX_CONCURRENCY, integer=True)))
    _no_unknown(value, {"kind", "rate_rps"}, where)
    return Arrival(kind, float(_number(value, "rate_rps", where, 0, MAX_RATE_RPS, above=True)))


def _targets(value: Any, where: str) -> ClassTargets:
    if value is None:
        return ClassTargets()
    if not isinstance(value, dict):
        raise ScenarioError(f"{where} = {value!r}: give a table of targets in ms")
    keys = set(ClassTargets.__dataclass_fields__)
    _no_unknown(value, keys, where)
    return ClassTargets(**{k: float(_number(value, k, where, 0, 3_600_000, above=True)) for k in value})


CLASS_FIELDS = {"name", "prompt_tokens", "output_tokens", "arrival", "turns", "thinking_share", "system", "text",
                "share", "targets"}


def _request_class(data: Any, where: str) -> RequestClass:
    if not isinstance(data, dict):
        raise ScenarioError(f"{where} = {str(data)[:40]!r}: each class is a table")
    _no_unknown(data, CLASS_FIELDS, where)
    name = _text(data, "name", where, max_chars=64).strip()
    if not name:
        raise ScenarioError(f"{where}.name is missing or empty: name the class, e.g. \"questions\"")
    try:
        return _class_fields(data, name, where)
    except ScenarioError as exc:
        raise ScenarioError(f"{exc} (class {name!r})") from None


def _class_fields(data: dict[str, Any], name: str, where: str) -> RequestClass:
    text = _text(data, "text", where)
    if "prompt_tokens" not in data and not text:
        raise ScenarioError(f"{where}.prompt_tokens is missing: give a token count (or a fixed text)")
    if "output_tokens" not in data:
        raise ScenarioError(f"{where}.output_tokens is missing: give a token count from 1 to {MAX_TOKENS}")
    share = data.get("share")
    return RequestClass(
        name=name,
        prompt_tokens=_length(data.get("prompt_tokens", 1), f"{where}.prompt_tokens"),
        output_tokens=_length(data["output_tokens"], f"{where}.output_tokens"),
        arrival=_arrival(data.get("arrival", {"kind": "poisson", "rate_rps": 1.0}), f"{where}.arrival"),
        turns=int(_number(data, "turns", where, 1, MAX_TURNS, default=1, integer=True)),
        thinking_share=float(_number(data, "thinking_share", where, 0, 1, default=0.0)),
        system=_text(data, "system", where), text=text,
        share=None if share is None else float(_number(data, "share", where, 0, 1e6, above=True)),
        targets=_targets(data.get("targets"), f"{where}.targets"))


def parse_scenario_data(data: Any, source: str = "the scenario") -> Scenario:
    """A scenario from parsed TOML/JSON; ScenarioError names the field, the value and what is allowed."""
    if not isinstance(data, dict):
        raise ScenarioError(f"{source}: expected a table with name and [[classes]], got {type(data).__name__}")
    _no_unknown(data, {"name", "description", "classes", "scaled_by"}, source)
    name = _text(data, "name", source, max_chars=64).strip()
    if not name:
        raise ScenarioError(f"{source}: name is missing or empty: name the scenario")
    classes = data.get("classes")
    if not isinstance(classes, list) or not 1 <= len(classes) <= MAX_CLASSES:
        count = len(classes) if isinstance(classes, list) else "no"
        raise ScenarioError(f"{source}: classes has {count} entries; give 1 to {MAX_CLASSES} [[classes]] tables")
    try:
        parsed = tuple(_request_class(c, f"classes[{i}]") for i, c in enumerate(classes))
    except ScenarioError as exc:
        raise ScenarioError(f"{source}: {exc}") from None
    names = [c.name for c in parsed]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ScenarioError(f"{source}: class name {dupes[0]!r} is used twice; each class needs its own name")
    scale = float(_number(data, "scaled_by", source, MIN_SCALE, 1.0, default=1.0))
    return Scenario(name, parsed, _text(data, "description", source, max_chars=2000), scale)


def parse_scenario(text: str, source: str = "the scenario file") -> Scenario:
    """A scenario from TOML or JSON text (JSON when it starts with '{')."""
    stripped = text.strip()
    if not stripped:
        raise ScenarioError(f"{source} is empty: write name = \"…\" and at least one [[classes]] table")
    try:
        data = json.loads(stripped) if stripped.startswith("{") else tomllib.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        kind = "JSON" if stripped.startswith("{") else "TOML"
        raise ScenarioError(f"{source} is not valid {kind}: {exc}") from None
    return parse_scenario_data(data, source)


# ---- the built-ins: the articles' workloads ----------------------------------------------------------

# The first article's content-generation request: one fixed prompt, in non-thinking mode.
CONTENT_PROMPT = "请用中文写一篇关于人工智能发展趋势的300字短文"

CUSTOMER_QA = RequestClass(
    "customer-qa", Length("normal", 80, 20, 20, 200), Length("normal", 120, 30, 30, 300), Arrival("poisson", 1.0),
    system="You are a helpful customer-service assistant. Answer briefly.",
    # The article's tuned configuration: 487 ms average, 592 ms P95.
    targets=ClassTargets(ttft_avg_ms=500, ttft_p95_ms=600))
LONG_DOCUMENT = RequestClass(
    "long-document", Length("normal", 10_200, 1_000, 4_000, 16_000), Length("normal", 320, 40, 100, 600),
    Arrival("poisson", 0.2), system="Summarise the document for a busy reader.",
    targets=ClassTargets(ttft_avg_ms=2000))  # the article's tuned 1890 ms
CODE_REVIEW = RequestClass(
    # 3 turns of 375 new tokens and 450-token replies: 375, 1200 and 2025 prompt tokens, 1200 on average.
    "code-review", Length("normal", 375, 60, 100, 800), Length("normal", 450, 60, 150, 900), Arrival("poisson", 0.5),
    turns=3, system="You are a code reviewer. Give line-by-line feedback on the code the user sends.",
    targets=ClassTargets(ttft_avg_ms=1300))  # the article's tuned 1240 ms
CONTENT_GENERATION = RequestClass(
    "content-generation", Length.fixed(30), Length.fixed(256), Arrival("closed", 0.0, 1), text=CONTENT_PROMPT)

BUILTIN_SCENARIOS: dict[str, Scenario] = {
    "customer-qa": Scenario("customer-qa", (CUSTOMER_QA,),
                            "customer questions: ~80 prompt tokens → ~120 out at 1 request/s"),
    "long-document": Scenario("long-document", (LONG_DOCUMENT,),
                              "long-document summaries: ~10,200 prompt tokens → ~320 out at 0.2 request/s"),
    "code-review": Scenario("code-review", (CODE_REVIEW,),
                            "multi-turn code review: ~1,200 prompt tokens with the history → ~450 out at 0.5 "
                            "request/s"),
    "content-generation": Scenario("content-generation", (CONTENT_GENERATION,),
                                   "the first article's fixed 300-character essay prompt, one client at a time"),
    "mixed": Scenario("mixed", (CUSTOMER_QA, LONG_DOCUMENT, CODE_REVIEW),
                      "customer-qa, long-document and code-review at once, each at its own rate"),
}


__all__ = ["ARRIVALS", "Arrival", "BUILTIN_SCENARIOS", "CONTENT_PROMPT", "DISTRIBUTIONS", "Length", "RequestClass",
           "Scenario", "ScenarioError", "parse_scenario", "parse_scenario_data", "request_rng", "request_seed"]
