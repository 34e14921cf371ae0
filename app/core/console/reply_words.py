"""What a backend's server calls a reply's figures, for the Prompt page's labels: the same figures
(generated tokens, decode rate, total time, why generation ended) read from each server's own final
record, each shown under the name its server gives it. Each backend's spec carries its words; exports
keep one set of keys."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ReplyWords:
    """A server's names for a reply's figures."""

    output_count: str  # the server's count of generated tokens
    count_header: str  # that count as a two-line table header
    decode_source: str  # where the decode rate comes from
    total_source: str  # where the total time comes from
    stop_field: str  # why generation ended
    think_hint: str  # how the thinking switch reaches the server, and what thinking tokens cost


__all__ = ["ReplyWords"]
