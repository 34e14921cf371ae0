"""What the page's sweep tests ask of a point: that it was measured cleanly, or flagged only because another process
competed for the machine meanwhile (the sweep's own judgement on a busy machine, not the feature under test)."""

from __future__ import annotations

from app.core.bench.outcome import PointStatus
from app.core.bench.sweep import PointResult


def measured(result: PointResult) -> bool:
    """True for an ok point, or one marked unstable only by contention (its requests all succeeded)."""
    if result.status is PointStatus.OK:
        return True
    return (result.status is PointStatus.UNSTABLE and result.contention.contended and result.stats is not None
            and result.stats.requests_failed == 0)
