"""What a backend's server calls a reply's figures, for the Prompt page's labels: the same figures read
from Ollama's final record (eval_count, done_reason, …) or llama-server's `timings` (predicted_n,
finish_reason, …), each shown under the name its server gives it. Exports keep one set of keys."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ReplyWords:
    """A server's names for a reply's figures (the defaults are Ollama's)."""

    output_count: str = "eval_count"  # the server's count of generated tokens
    count_header: str = "eval\ncount"  # that count as a two-line table header
    decode_source: str = "eval_count / eval_duration"  # where the decode rate comes from
    total_source: str = "total_duration"  # where the total time comes from
    stop_field: str = "done_reason"  # why generation ended
    think_hint: str = ("Sent as the request's think field. Thinking tokens count in eval_count and delay the first "
                       "answer token.")


OLLAMA_WORDS = ReplyWords()

__all__ = ["OLLAMA_WORDS", "ReplyWords"]
