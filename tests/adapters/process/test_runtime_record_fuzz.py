"""Fuzzing the runtime records of started servers: any file content, and records naming real
processes with hostile fields, is read or removed without raising and never gets a bystander
stopped (the property is in runtime_record_properties, for longer runs to reuse)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings

from tests.adapters.process.runtime_record_properties import check_record_bytes, hostile_record, record_bytes

FUZZ = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(raw=record_bytes())
def test_any_record_file_is_read_or_removed_and_never_stops_a_bystander(raw: bytes) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        check_record_bytes(Path(scratch), raw)


def test_the_property_sees_records_of_each_kind(tmp_path: Path) -> None:
    """Not vacuous: hostile records of real processes are read and judged, not all refused."""
    import json

    seen: set[str] = set()

    @settings(max_examples=150, deadline=None, database=None)
    @given(document=hostile_record())
    def look(document: dict[str, object]) -> None:
        with tempfile.TemporaryDirectory() as scratch:
            seen.update(check_record_bytes(Path(scratch), json.dumps(document).encode()).split(","))

    look()
    assert {"OWNED", "REUSED", "unreadable"} <= seen, seen
