"""What the requests a demo step has in flight show right now, for the presenter's figures."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LiveRequests:
    """The app's own requests of the running step: how many stream now, the typical reply's decode rate and the
    time to first token. Rates and times are None until a reply has given them."""

    in_flight: int = 0
    sent: int = 0  # requests the step has sent so far
    finished: int = 0
    per_request_tps: float | None = None  # median decode rate over the replies streaming (or the last finished)
    ttft_ms: float | None = None  # median time to first token over the replies that have one
    aggregate_tps: float | None = None  # the step's own total over its replies (None: use the token meter)


IDLE = LiveRequests()
