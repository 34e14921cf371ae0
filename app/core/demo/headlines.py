"""What a demo step's figures say: the live figures of its requests, and each step's headline in numbers
("8 users: 41 tok/s together, 5.2 tok/s each, TTFT 0.8 s"), for a room to read."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from app.core.bench.recommend import Recommendation, measured_points
from app.core.bench.run import SweepRun
from app.core.console.reply_stats import BurstSummary, ReplyStats, ThinkingCost
from app.core.demo.live import LiveRequests


def reply_rate(stats: ReplyStats) -> float | None:
    """One reply's decode rate: the server's own once it finished, else its stream's since the first token."""
    if stats.decode_tokens_per_s:
        return stats.decode_tokens_per_s
    if stats.ttft_ms is None or stats.streamed_tokens < 2:
        return None
    span_s = (stats.wall_ms - stats.ttft_ms) / 1e3
    return (stats.streamed_tokens - 1) / span_s if span_s > 0 else None


def reply_tokens(stats: ReplyStats) -> int:
    """The tokens a reply produced: the server's count when it gave one, else the stream's."""
    return stats.output_tokens if stats.output_tokens is not None else stats.streamed_tokens


def live_requests(streaming: Sequence[ReplyStats], finished: Sequence[ReplyStats], *, sent: int, done: int,
                  in_flight: int, elapsed_s: float) -> LiveRequests:
    """The figures of a step's requests now: decode rate the median over the replies streaming (over those
    finished when none streams), TTFT the median over every reply that has one, the aggregate all their
    tokens over the time since the requests went out."""
    rate = median_rate(streaming)
    ttfts = [s.ttft_ms for s in (*streaming, *finished) if s.ttft_ms is not None]
    tokens = sum(reply_tokens(s) for s in (*streaming, *finished))
    return LiveRequests(in_flight=in_flight, sent=sent, finished=done,
                        per_request_tps=rate if rate is not None else median_rate(finished),
                        ttft_ms=statistics.median(ttfts) if ttfts else None,
                        aggregate_tps=tokens / elapsed_s if elapsed_s > 0 and tokens else None)


def rate_words(tokens_per_s: float | None) -> str:
    """"41 tok/s", "5.2 tok/s", "— tok/s" (big figures without decimals: a room reads them)."""
    if tokens_per_s is None:
        return "— tok/s"
    return f"{tokens_per_s:.0f} tok/s" if tokens_per_s >= 20 else f"{tokens_per_s:.1f} tok/s"


def seconds_words(ms: float | None) -> str:
    """"0.8 s", "12 s", "—"."""
    if ms is None:
        return "—"
    seconds = ms / 1e3
    return f"{seconds:.2f} s" if seconds < 0.1 else f"{seconds:.1f} s" if seconds < 10 else f"{seconds:.0f} s"


def median_rate(replies: Sequence[ReplyStats]) -> float | None:
    """The median decode rate of the replies that have one (the live figure's rule, so the headline says the
    same)."""
    rates = [r for s in replies if (r := reply_rate(s)) is not None]
    return statistics.median(rates) if rates else None


def burst_headline(summary: BurstSummary, each: float | None = None) -> str:
    """"8 users: 41 tok/s together, 5.2 tok/s each, TTFT 0.8 s" (one user: its rate, TTFT and tokens), and how
    many failed or stopped when some did; `each` is the typical reply's rate (None: the mean of the replies')."""
    each = each if each is not None else summary.mean_decode_tokens_per_s
    if summary.requested == 1:
        line = (f"One user: {rate_words(each)}, TTFT {seconds_words(summary.ttft_median_ms)}, "
                f"{summary.output_tokens} tokens")
    else:
        line = (f"{summary.requested} users: {rate_words(summary.aggregate_tokens_per_s)} together, "
                f"{rate_words(each)} each, TTFT {seconds_words(summary.ttft_median_ms)}")
    lost = summary.requested - summary.completed
    return f"{line} ({lost} of {summary.requested} did not finish)" if lost else line


def burst_figures(summary: BurstSummary, each: float | None = None) -> dict[str, float]:
    """The burst's named results (those known); `each` as in burst_headline."""
    named = {"aggregate tok/s": summary.aggregate_tokens_per_s,
             "tok/s each": each if each is not None else summary.mean_decode_tokens_per_s,
             "TTFT ms": summary.ttft_median_ms, "tokens": float(summary.output_tokens)}
    return {name: value for name, value in named.items() if value is not None}


def parallel_key(value: int) -> str:
    """The figure naming one parallel value's aggregate tokens/s, e.g. "parallel 8"."""
    return f"parallel {value}"


def parallel_headline(rates: Sequence[tuple[int, float | None]], users: int) -> str:
    """"8 users: parallel 8 gives 41 tok/s together, ×3.4 parallel 1's 12 tok/s"; every value when more than two."""
    known = [(value, rate) for value, rate in rates if rate]
    if not known:
        return f"{users} users: no figures"
    if len(rates) != 2 or len(known) != 2:
        return f"{users} users: " + ", ".join(f"{parallel_key(v)}: {rate_words(r)}" for v, r in rates)
    (first, a), (second, b) = known
    return (f"{users} users: {parallel_key(second)} gives {rate_words(b)} together, ×{b / a:.1f} "
            f"{parallel_key(first)}'s {rate_words(a)}")


def ab_headline(cost: ThinkingCost) -> str:
    """"Thinking costs +412 tokens, +3.2 s to the first answer token"."""
    return f"Thinking costs {cost.summary()}"


def short_reason(text: str) -> str:
    """A server's reason cut to its first clause, for a room: "this model's chat template has no thinking mode"
    of "this model's chat template has no thinking mode (it reads neither …), so thinking is not sent."."""
    return text.split(" (")[0].split(", so ")[0].split("; ")[0].rstrip(" .;:,") or text


def first_sentence(text: str) -> str:
    """The text up to its first full stop (all of it when it has none)."""
    head, dot, _rest = text.partition(". ")
    return head + "." if dot else text


def sweep_headline(run: SweepRun, recommendation: Recommendation | None) -> str:
    """The recommendation in words: "Recommended: parallel 2, 41 tok/s within the targets (parallel 1 gives 96 %
    of it)", or in a few words why there is none ("No recommendation: no point met the targets; …")."""
    best = run.result_for(recommendation.index) if recommendation is not None else None
    if recommendation is None or best is None:
        return f"No recommendation: {_why_none(run, recommendation)}"
    line = f"Recommended: {best.point.label(run.varying)}, {rate_words(recommendation.output_tokens_per_s)}"
    line += " within the targets" if recommendation.meets_targets else ""
    cheaper = run.result_for(recommendation.plateau_index) if recommendation.plateau else None
    if cheaper is not None and cheaper.stats is not None and recommendation.output_tokens_per_s:
        share = cheaper.stats.output_tokens_per_s / recommendation.output_tokens_per_s
        line += f" ({cheaper.point.label(run.varying)} gives {share * 100:.0f} % of it)"
    return line


def _why_none(run: SweepRun, recommendation: Recommendation | None) -> str:
    measured = measured_points(run.results)
    if not measured:
        return "no point produced a measurement"
    left_out = set(recommendation.contended + recommendation.spoiled) if recommendation is not None else set()
    if all(m.result.point.index in left_out for m in measured):
        return ("other programs shared the device at every point" if recommendation and recommendation.contended
                else "the server's events spoiled every point")
    fastest = max(measured, key=lambda m: m.stats.output_tokens_per_s)
    return (f"no point met the targets; the fastest, {fastest.result.point.label(run.varying)}, reached "
            f"{rate_words(fastest.stats.output_tokens_per_s)}")


def sweep_figures(run: SweepRun) -> dict[str, float]:
    """Each measured point's aggregate output tokens/s, by its label."""
    return {m.result.point.label(run.varying): m.stats.output_tokens_per_s for m in measured_points(run.results)}


__all__ = ["ab_headline", "burst_figures", "burst_headline", "first_sentence", "live_requests", "median_rate",
           "parallel_headline", "parallel_key", "rate_words", "reply_rate", "reply_tokens", "seconds_words",
           "short_reason", "sweep_figures", "sweep_headline"]
