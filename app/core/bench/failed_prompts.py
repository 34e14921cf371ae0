"""Which prompts failed, across a sweep's points: every measured request that failed, grouped by what it sent.

A request is the same request at every point when it sends the same thing: in a plain workload request i sends
prompt i (modulo the set) with seed base + i, in a scenario a class's conversation and turn are drawn from the
plan's seed. So a request that fails at every point that sent it fails for what it asks, not for the setting
(a server that ends that reply early whatever its settings), and the sweep says so."""

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
    """One failed request at one point: the point, its failure class (RequestRecord.error_kind), its words and the
    tokens that arrived before it ended."""

    point: int
    kind: str
    error: str
    tokens: int


@dataclass(frozen=True)
class FailedPrompt:
    """A request that failed at one point or more: what it sent, and how it failed where it did."""

    key: str  # "request 3", or "<class> conversation 2 turn 1" in a scenario
    preview: str  # the start of its prompt text (a scenario's made texts are not kept: its class)
    failures: tuple[PromptFailure, ...]  # in point order
    sent_at: tuple[int, ...]  # the points whose measured requests include it

    @property
    def kinds(self) -> tuple[str, ...]:
        """Its failure classes, each once, in the order first met."""
        return tuple(dict.fromkeys(f.kind for f in self.failures))

    @property
    def every_point(self) -> bool:
        """True when it failed at every point that sent it, and more than one did: its failure follows the prompt."""
        return len(self.sent_at) > 1 and {f.point for f in self.failures} == set(self.sent_at)

    def kind_words(self) -> str:
        """Its failure classes in words ("ended without its final record")."""
        return ", ".join(ERROR_WORDS.get(k, k) for k in self.kinds)

    def tokens_words(self) -> str:
        """The tokens received before it ended: "37" where the same at every point, else "12–40"."""
        counts = sorted({f.tokens for f in self.failures})
        return str(counts[0]) if len(counts) == 1 else f"{counts[0]}–{counts[-1]}"

    def points_words(self) -> str:
        """"3 of 3 points" (failed of sent)."""
        failed = len({f.point for f in self.failures})
        return f"{failed} of {len(self.sent_at)} point{'s' if len(self.sent_at) != 1 else ''}"

    def finding(self) -> str:
        """The sweep-level sentence for a request failing everywhere it was sent, "" otherwise."""
        if not self.every_point:
            return ""
        return (f"{self.key} ({quoted(self.preview)}) failed at every point that sent it ({self.points_words()}: "
                f"{self.kind_words()}, after {self.tokens_words()} tokens): it fails for what it asks, not for the "
                "setting.")

    def to_json(self) -> dict[str, Any]:
        """Plain dict for --json and the report."""
        return {"request": self.key, "prompt": self.preview, "kinds": list(self.kinds),
                "points_failed": len({f.point for f in self.failures}), "points_sent": len(self.sent_at),
                "every_point": self.every_point,
                "failures": [{"point": f.point, "kind": f.kind, "error": f.error, "tokens": f.tokens}
                             for f in self.failures]}


def quoted(text: str) -> str:
    """A preview in quotes, its line breaks as spaces."""
    return f"“{' '.join(text.split())}”"


def _preview(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= PREVIEW_CHARS else flat[:PREVIEW_CHARS - 1].rstrip() + "…"


def _identity(record: RequestRecord, plan: LoadPlan) -> tuple[str, str]:
    """(key, preview) of the request a record is of."""
    if record.request_class:
        where = f"conversation {record.conversation} turn {record.turn}" if record.conversation is not None else ""
        return (" ".join(x for x in (record.request_class, where) if x),
                f"a “{record.request_class}” request")
    prompt = plan.prompt_for(record.index) if plan.prompts else None
    return f"request {record.index}", _preview(prompt.text) if prompt is not None else ""


def failed_prompts(results: Sequence[PointResult], plan: LoadPlan) -> list[FailedPrompt]:
    """Every request that failed at a point, with where it failed and where it was sent; those failing at every
    point first, then by how many points it failed at, then in request order."""
    sent: dict[str, list[int]] = {}
    failed: dict[str, list[PromptFailure]] = {}
    previews: dict[str, str] = {}
    order: dict[str, int] = {}
    for r in results:
        for record in r.records:
            if record.warmup:
                continue
            key, preview = _identity(record, plan)
            previews.setdefault(key, preview)
            order.setdefault(key, len(order))
            sent.setdefault(key, []).append(r.point.index)
            if not record.ok:
                failed.setdefault(key, []).append(PromptFailure(r.point.index, record.error_kind, record.error,
                                                                record.output_tokens))
    prompts = [FailedPrompt(key, previews[key], tuple(failures), tuple(dict.fromkeys(sent[key])))
               for key, failures in failed.items()]
    return sorted(prompts, key=lambda p: (not p.every_point, -len({f.point for f in p.failures}), order[p.key]))


def failures_at(prompts: Sequence[FailedPrompt], point: int) -> list[tuple[FailedPrompt, PromptFailure]]:
    """The failed requests of one point, with what each is."""
    return [(p, f) for p in prompts for f in p.failures if f.point == point]


def failed_prompt_lines(prompts: Sequence[FailedPrompt], limit: int = 12) -> list[str]:
    """The bench table's "Failed prompts" section: the findings, then a line per request (prompt preview, failure,
    tokens received, in how many points); [] when none failed."""
    if not prompts:
        return []
    out = [f for p in prompts if (f := p.finding())]
    out += ["", "Failed prompts:"] if out else ["Failed prompts:"]
    for p in prompts[:limit]:
        out.append(f"  {p.key} {quoted(p.preview)}: {p.kind_words()}, after {p.tokens_words()} tokens, "
                   f"{p.points_words()}")
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
    out += ["| Request | Prompt | Failure | Tokens received | Points |", "|---|---|---|---|---|"]
    for p in prompts:
        cells = [p.key, quoted(p.preview), p.kind_words(), p.tokens_words(), p.points_words()]
        out.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return out


def failed_prompts_json(prompts: Sequence[FailedPrompt]) -> list[Mapping[str, Any]]:
    """The list --json writes under "failed_prompts"."""
    return [p.to_json() for p in prompts]


__all__ = ["FailedPrompt", "PREVIEW_CHARS", "PromptFailure", "failed_prompt_lines", "failed_prompts",
           "failed_prompts_json", "failed_prompts_markdown", "failures_at", "quoted"]
