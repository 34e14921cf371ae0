"""A prompt-console conversation (Markdown for people, JSON for tools) or burst (CSV, JSON) as a document.

Each turn keeps what was asked (model, thinking mode, prompt), what came back (the thinking trace
and the answer exactly as streamed), how it ended (finished, stopped, the server's error) and its
figures, so an exported conversation can be read, shared or compared later.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from typing import Any
from collections.abc import Sequence

from app.core.console.reply_stats import BurstSummary, ReplyStats, ThinkingCost, figures_line, mode_text
from app.core.console.reply_words import ReplyWords

FORMAT_VERSION = 1


@dataclass(frozen=True)
class TurnRecord:
    """One turn as the console showed it."""

    prompt: str
    model: str
    think: bool | str | None
    thinking: str = ""
    answer: str = ""
    stats: ReplyStats | None = None
    error: str = ""  # the server's message, when the reply failed
    stopped: bool = False
    system: str = ""  # the system prompt the turn was sent with

    @property
    def ending(self) -> str:
        """'finished (stop)', 'stopped', 'failed' or 'not finished'."""
        if self.error:
            return "failed"
        if self.stopped:
            return "stopped"
        if self.stats is not None and self.stats.finished:
            return f"finished ({self.stats.done_reason})"
        return "not finished"


def _fence(text: str) -> str:
    """A code fence longer than any run of backticks in the text, so the text cannot close it."""
    longest = run = 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    return "`" * max(3, longest + 1)


def _quote(text: str) -> str:
    return "\n".join(f"> {line}" if line else ">" for line in text.splitlines() or [""])


def conversation_markdown(turns: Sequence[TurnRecord], server: str, exported_at: str, *, words: ReplyWords) -> str:
    """The conversation as Markdown: prompts quoted, thinking folded in <details>, answers as written;
    the system prompt is shown where it first applies and wherever it changed; figures under `words`,
    the server's own names for them."""
    lines = ["# Prompt console conversation", "",
             f"Server {server} · exported {exported_at} · {len(turns)} turn{'s' if len(turns) != 1 else ''}", ""]
    system = ""
    for n, turn in enumerate(turns, 1):
        lines += [f"## Turn {n} · {turn.model} · {mode_text(turn.think)}", ""]
        if turn.system != system:
            lines += ["**System prompt:**" if turn.system.strip() else "*No system prompt from here on.*", ""]
            if turn.system.strip():
                lines += [_quote(turn.system), ""]
            system = turn.system
        lines += ["**Prompt:**", "", _quote(turn.prompt), ""]
        lines += _reply_lines(turn, words)
    return "\n".join(lines).rstrip("\n") + "\n"


def _reply_lines(turn: TurnRecord, words: ReplyWords) -> list[str]:
    """A reply in Markdown: the thinking folded, the answer as written, how it ended, its figures."""
    lines: list[str] = []
    if turn.thinking:
        fence = _fence(turn.thinking)
        lines += ["<details><summary>Thinking</summary>", "", f"{fence}text", turn.thinking.rstrip("\n"),
                  fence, "", "</details>", ""]
    if turn.answer:
        lines += [turn.answer.rstrip("\n"), ""]
    if turn.error:
        lines += [f"**Error from the server:** {turn.error}", ""]
    elif turn.stopped:
        lines += ["*Stopped before the end.*", ""]
    if turn.stats is not None:
        lines += [f"<sub>{figures_line(turn.stats, words)}</sub>", ""]
    return lines


def _turn_json(t: TurnRecord) -> dict[str, Any]:
    return {"model": t.model, "think": t.think, "system": t.system, "prompt": t.prompt, "thinking": t.thinking,
            "answer": t.answer, "ending": t.ending, "error": t.error or None,
            "figures": t.stats.to_json() if t.stats is not None else None}


def conversation_json(turns: Sequence[TurnRecord], server: str, exported_at: str) -> str:
    """The conversation as one JSON document (figures with their units in the keys)."""
    document: dict[str, Any] = {
        "format": "ollama-deck conversation", "version": FORMAT_VERSION, "server": server,
        "exported_at": exported_at,
        "turns": [_turn_json(t) for t in turns],
    }
    return json.dumps(document, indent=1, ensure_ascii=False) + "\n"


@dataclass(frozen=True)
class BurstReply:
    """One copy of a burst as the console showed it."""

    index: int  # 0-based; shown from 1
    state: str  # done, failed, stopped, lost
    stats: ReplyStats | None = None
    error: str = ""


BURST_CSV_FIELDS = ("reply", "state", "ttft_ms", "first_answer_ms", "thinking_tokens", "answer_tokens", "eval_count",
                    "eval_tokens_per_s", "prompt_eval_count", "prompt_tokens_per_s", "load_ms", "total_ms", "wall_ms",
                    "done_reason", "error")


def burst_csv(replies: Sequence[BurstReply]) -> str:
    """One row per copy, figures with their units in the column names (empty where unknown)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(BURST_CSV_FIELDS)
    for reply in replies:
        figures = reply.stats.to_json() if reply.stats is not None else {}
        row = {"reply": reply.index + 1, "state": reply.state, "error": reply.error, **figures}
        writer.writerow(["" if row.get(name) is None else row.get(name, "") for name in BURST_CSV_FIELDS])
    return out.getvalue()


def burst_json(replies: Sequence[BurstReply], summary: BurstSummary | None, model: str, think: bool | str | None,
               prompt: str, server: str, exported_at: str) -> str:
    """The burst as one JSON document: what was sent, the aggregate figures and every copy."""
    document: dict[str, Any] = {
        "format": "ollama-deck burst", "version": FORMAT_VERSION, "server": server, "exported_at": exported_at,
        "model": model, "think": think, "prompt": prompt, "copies": len(replies),
        "summary": summary.to_json() if summary is not None else None,
        "replies": [{"reply": r.index + 1, "state": r.state, "error": r.error or None,
                     "figures": r.stats.to_json() if r.stats is not None else None} for r in replies],
    }
    return json.dumps(document, indent=1, ensure_ascii=False) + "\n"


def ab_markdown(with_thinking: TurnRecord, without: TurnRecord, cost: ThinkingCost | None, server: str,
                exported_at: str, *, words: ReplyWords) -> str:
    """An A/B comparison as Markdown: the prompt once, each side's reply (figures under `words`, the server's
    names for them), then what thinking cost."""
    lines = ["# Thinking against non-thinking", "",
             f"Server {server} · exported {exported_at} · {with_thinking.model}", ""]
    if with_thinking.system.strip():
        lines += ["**System prompt:**", "", _quote(with_thinking.system), ""]
    lines += ["**Prompt:**", "", _quote(with_thinking.prompt), ""]
    for title, side in (("With thinking", with_thinking), ("Without thinking", without)):
        lines += [f"## {title} · {mode_text(side.think)}", ""] + _reply_lines(side, words)
    lines += ["## Cost of thinking", "",
              (cost.summary() if cost is not None else "not measurable (a reply did not finish)")
              + " (sent one after the other; load time left out).", ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def ab_json(with_thinking: TurnRecord, without: TurnRecord, cost: ThinkingCost | None, server: str,
            exported_at: str) -> str:
    """An A/B comparison as one JSON document."""
    document: dict[str, Any] = {
        "format": "ollama-deck a/b", "version": FORMAT_VERSION, "server": server, "exported_at": exported_at,
        "with_thinking": _turn_json(with_thinking), "without_thinking": _turn_json(without),
        "cost_of_thinking": None if cost is None else {
            "thinking_tokens": cost.thinking_tokens, "extra_tokens": cost.extra_tokens,
            "extra_first_answer_ms": cost.extra_first_answer_ms, "extra_total_ms": cost.extra_total_ms,
            "token_ratio": cost.token_ratio, "summary": cost.summary()},
    }
    return json.dumps(document, indent=1, ensure_ascii=False) + "\n"
