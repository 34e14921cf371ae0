"""Which prompts failed, across a sweep's points: every measured request that failed, grouped by the prompt it sent.

In a plain workload request i sends prompt i (modulo the set), in a scenario each request is its class's; every
point sends the same requests. So a prompt that fails at every point that sent it fails for what it asks, not for
the setting (a server that ends its reply to that prompt early whatever its settings), and the sweep says so."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.core.bench.outcome import ERROR_WORDS
from app.core.bench.stats import RequestRecord
from app.core.bench.sweep import PointResult
from app.core.bench.workload import LoadPlan

PREVIEW_CHARS = 60  # of a prompt's text, in tables and tooltips


@dataclass(frozen=True)
class PromptFailure:
    """One failed request at one point: the point, the request, its failure class (RequestRecord.error_kind), its
    words and the tokens that arrived before it ended."""

    point: int
    request: int
    kind: str
    error: str
    tokens: int


@dataclass(frozen=True)
class FailedPrompt:
    """A prompt that failed at one point or more: which, how it failed where it did, and where it was sent."""

    key: str  # "prompt 2 of 3", or the scenario class's name
    index: int | None  # the prompt's place in the workload's set, from 0 (None: a scenario class)
    preview: str  # the start of its text (a scenario's made texts are not kept: its class)
    failures: tuple[PromptFailure, ...]  # in point order
    sent: tuple[tuple[int, int], ...]  # (point, requests of it sent there), for each point that sent it

    @property
    def kinds(self) -> tuple[str, ...]:
        """Its failure classes, each once, in the order first met."""
        return tuple(dict.fromkeys(f.kind for f in self.failures))

    @property
    def points_failed(self) -> int:
        """The points where it failed at least once."""
        return len({f.point for f in self.failures})

    @property
    def requests_sent(self) -> int:
        """Its measured requests, over every point."""
        return sum(n for _p, n in self.sent)

    @property
    def every_point(self) -> bool:
        """True when it failed at every point that sent it, and more than one did: its failure follows the prompt."""
        return len(self.sent) > 1 and self.points_failed == len(self.sent)

    def kind_words(self) -> str:
        """Its failure classes in words ("reply ended without its final record")."""
        return ", ".join(ERROR_WORDS.get(k, k) for k in self.kinds)

    def tokens_words(self) -> str:
        """The tokens received before it ended: "37" where the same every time, else "12–40"."""
        counts = sorted({f.tokens for f in self.failures})
        return str(counts[0]) if len(counts) == 1 else f"{counts[0]}–{counts[-1]}"

    def points_words(self) -> str:
        """"2 of 2 points" (failed at, of sent at)."""
        return f"{self.points_failed} of {len(self.sent)} point{'s' if len(self.sent) != 1 else ''}"

    def requests_words(self) -> str:
        """"4 of 4 requests" (failed, of sent)."""
        return f"{len(self.failures)} of {self.requests_sent} request{'s' if self.requests_sent != 1 else ''}"

    def finding(self) -> str:
        """The sweep-level sentence for a prompt failing at every point that sent it, "" otherwise."""
        if not self.every_point:
            return ""
        return (f"{self.key} ({quoted(self.preview)}) failed at every point that sent it ({self.points_words()}, "
                f"{self.requests_words()}: {self.kind_words()}, after {self.tokens_words()} tokens): it fails for "
                "what it asks, not for the setting.")

    def to_json(self) -> dict[str, Any]:
        """Plain dict for --json."""
        return {"prompt": self.key, "prompt_index": self.index, "text": self.preview, "kinds": list(self.kinds),
                "points_failed": self.points_failed, "points_sent": len(self.sent),
                "requests_failed": len(self.failures), "requests_sent": self.requests_sent,
                "every_point": self.every_point,
                "failures": [{"point": f.point, "request": f.request, "kind": f.kind, "error": f.error,
                              "tokens": f.tokens} for f in self.failures]}


def quoted(text: str) -> str:
    """A preview in quotes, its line breaks as spaces."""
    return f"“{' '.join(text.split())}”"


def _preview(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= PREVIEW_CHARS else flat[:PREVIEW_CHARS - 1].rstrip() + "…"


def _identity(record: RequestRecord, plan: LoadPlan) -> tuple[str, int | None, str]:
    """(key, prompt index, preview) of the prompt a record's request sent."""
    if record.request_class:
        return f"class “{record.request_class}”", None, f"a “{record.request_class}” request"
    if not plan.prompts:
        return f"request {record.index}", None, ""
    index = record.index % len(plan.prompts)
    return f"prompt {index + 1} of {len(plan.prompts)}", index, _preview(plan.prompts[index].text)


def failed_prompts(results: Sequence[PointResult], plan: LoadPlan) -> list[FailedPrompt]:
    """Every prompt that failed at a point, with where and how, and where it was sent; those failing at every point
    first, then by how many points they failed at, then in the set's order."""
    sent: dict[str, dict[int, int]] = {}
    failed: dict[str, list[PromptFailure]] = {}
    known: dict[str, tuple[int | None, str]] = {}
    order: dict[str, int] = {}
    for r in results:
        for record in r.records:
            if record.warmup:
                continue
            key, index, preview = _identity(record, plan)
            known.setdefault(key, (index, preview))
            order.setdefault(key, index if index is not None else len(order))
            at = sent.setdefault(key, {})
            at[r.point.index] = at.get(r.point.index, 0) + 1
            if not record.ok:
                failed.setdefault(key, []).append(PromptFailure(r.point.index, record.index, record.error_kind,
                                                                record.error, record.output_tokens))
    prompts = [FailedPrompt(key, *known[key], tuple(failures), tuple(sent[key].items()))
               for key, failures in failed.items()]
    return sorted(prompts, key=lambda p: (not p.every_point, -p.points_failed, order[p.key]))


def failures_at(prompts: Sequence[FailedPrompt], point: int) -> list[tuple[FailedPrompt, PromptFailure]]:
    """The failed requests of one point, with the prompt each sent."""
    return [(p, f) for p in prompts for f in p.failures if f.point == point]


def failed_prompt_lines(prompts: Sequence[FailedPrompt], limit: int = 12) -> list[str]:
    """The bench table's "Failed prompts" section: the findings, then a line per prompt (its text's start, the
    failure, tokens received, in how many points and requests); [] when none failed."""
    if not prompts:
        return []
    out = [f for p in prompts if (f := p.finding())]
    out += ["", "Failed prompts:"] if out else ["Failed prompts:"]
    for p in prompts[:limit]:
        out.append(f"  {p.key} {quoted(p.preview)}: {p.kind_words()}, after {p.tokens_words()} tokens; "
                   f"{p.points_words()}, {p.requests_words()}")
    if len(prompts) > limit:
        out.append(f"  … and {len(prompts) - limit} more (see --json)")
    return out


def failed_prompts_markdown(prompts: Sequence[FailedPrompt]) -> list[str]:
    """The report's "Failed prompts" section (a heading, the findings, a table); [] when none failed."""
    if not prompts:
        return []
    out = ["", "## Failed prompts", ""]
    findings = [f for p in prompts if (f := p.finding())]
    if findings:
        out += [f"- **{f}**" for f in findings] + [""]
    out += ["| Prompt | Text | Failure | Tokens received | Points | Requests |", "|---|---|---|---|---|---|"]
    for p in prompts:
        cells = [p.key, quoted(p.preview), p.kind_words(), p.tokens_words(), p.points_words(), p.requests_words()]
        out.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return out


def failed_prompts_json(prompts: Sequence[FailedPrompt]) -> list[Mapping[str, Any]]:
    """The list --json writes under "failed_prompts"."""
    return [p.to_json() for p in prompts]


__all__ = ["FailedPrompt", "PREVIEW_CHARS", "PromptFailure", "failed_prompt_lines", "failed_prompts",
           "failed_prompts_json", "failed_prompts_markdown", "failures_at", "quoted"]
