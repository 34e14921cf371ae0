"""Whatever bytes lie where a history should be, opening it through the real BenchHistory and
ApplyHistory reads it (some runs perhaps reported unreadable), refuses it with a HistoryError that
names the file, or moves it aside whole — and the original bytes are never lost.

The properties are plain functions, so a longer run can reuse them, e.g.:

    from hypothesis import settings
    settings.register_profile("long", max_examples=5000); settings.load_profile("long")
"""

from __future__ import annotations

import functools
import sqlite3
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.adapters.storage.apply_history import APPLY_HISTORY_FILE_NAME, ApplyHistory
from app.adapters.storage.history import HISTORY_FILE_NAME, BenchHistory, HistoryError
from tests.adapters.storage.test_history import make_run

SUITE = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _moved_aside(folder: Path) -> list[Path]:
    return [p for p in folder.iterdir() if ".corrupt-" in p.name and not p.name.endswith(("-wal", "-shm"))]


def _plain_ids(raw: bytes, table: str) -> set[int]:
    """The row ids a plain SQLite read of a copy of raw sees (none when it cannot read it)."""
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / "copy.sqlite3"
        copy.write_bytes(raw)
        try:
            conn = sqlite3.connect(f"{copy.as_uri()}?mode=ro", uri=True)
            try:
                return {row[0] for row in conn.execute(f"SELECT id FROM {table}")}
            finally:
                conn.close()
        except (sqlite3.Error, UnicodeDecodeError):  # the latter: SQLite's message quotes damaged bytes
            return set()


def _kept_whole(folder: Path, path: Path, raw: bytes) -> bool:
    """The original bytes are still at path, or in a copy moved aside."""
    if path.exists() and path.read_bytes() == raw:
        return True
    return [p.read_bytes() for p in _moved_aside(folder)] == [raw]


def check_history_bytes(folder: Path, raw: bytes) -> str:
    """raw as benchmarks.sqlite3 in an empty folder, opened for real; returns 'read', 'refused' or 'set aside'."""
    path = folder / HISTORY_FILE_NAME
    path.write_bytes(raw)
    expected = _plain_ids(raw, "runs")
    history = BenchHistory(path, busy_timeout_s=0.5)
    try:
        summaries = history.list_runs()
    except HistoryError as exc:
        assert str(path) in exc.message, exc.message
        assert _kept_whole(folder, path, raw)
        return "refused"
    for summary in summaries:
        try:
            history.load(summary.run_id)
        except HistoryError as exc:  # one damaged run: said, with the file's name
            assert str(path) in exc.message and "damaged" in exc.message, exc.message
    kept = _moved_aside(folder)
    if kept:
        assert [p.read_bytes() for p in kept] == [raw]
        assert any(str(kept[0]) in p for p in history.problems), history.problems
        assert summaries == []
        return "set aside"
    assert expected <= {s.run_id for s in summaries}  # every run the file holds is listed
    return "read"


def check_apply_bytes(folder: Path, raw: bytes) -> str:
    """raw as apply-checks.sqlite3, opened for real; returns 'read', 'refused' or 'set aside'."""
    path = folder / APPLY_HISTORY_FILE_NAME
    path.write_bytes(raw)
    expected = _plain_ids(raw, "apply_checks")
    log = ApplyHistory(path, busy_timeout_s=0.5)  # never raises: the app must start
    kept = _moved_aside(folder)
    if kept:
        assert [p.read_bytes() for p in kept] == [raw]
        assert any(str(kept[0]) in p for p in log.problems), log.problems
        assert log.saving and log.recent() == []
        return "set aside"
    if not log.readable:
        assert log.problems and str(path) in log.problems[0], log.problems
        assert _kept_whole(folder, path, raw)
        return "refused"
    try:
        records = log.recent(limit=10_000)
    except HistoryError as exc:
        assert str(path) in exc.message, exc.message
        return "refused"
    assert len(records) >= len(expected)
    return "read"


@functools.cache
def real_history() -> bytes:
    """The bytes of a benchmark history holding three sweeps, as the app leaves it."""
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / HISTORY_FILE_NAME
        history = BenchHistory(path)
        for points in (2, 3, 4):
            history.save(make_run(points=points, records=6))
        return path.read_bytes()


@functools.cache
def real_apply_log() -> bytes:
    """The bytes of an apply-check log holding five records."""
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / APPLY_HISTORY_FILE_NAME
        log = ApplyHistory(path)
        for n in range(5):
            log.add({"at": float(n), "kept": n % 2 == 0, "reason": f"check {n}", "tried": {"backend": "ollama"}})
        return path.read_bytes()


def flipped(raw: bytes, bits: list[int]) -> bytes:
    """raw with the given bit positions inverted."""
    data = bytearray(raw)
    for bit in bits:
        data[(bit // 8) % len(data)] ^= 1 << (bit % 8)
    return bytes(data)


def damaged(real: bytes) -> st.SearchStrategy[bytes]:
    """Arbitrary bytes, a real file behind an SQLite header, truncated copies and bit-flipped copies."""
    header = real[:100]
    return st.one_of(
        st.binary(max_size=2048),
        st.binary(min_size=1, max_size=len(real)).map(lambda tail: header + tail),
        st.integers(0, len(real)).map(lambda n: real[:n]),
        st.lists(st.integers(0, len(real) * 8 - 1), min_size=1, max_size=16).map(lambda bits: flipped(real, bits)),
    )


@SUITE
@given(raw=damaged(real_history()))
def test_any_bytes_as_a_benchmark_history_are_read_refused_or_moved_aside_whole(raw: bytes) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        check_history_bytes(Path(scratch), raw)


@SUITE
@given(raw=damaged(real_apply_log()))
def test_any_bytes_as_an_apply_check_log_are_read_refused_or_moved_aside_whole(raw: bytes) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        check_apply_bytes(Path(scratch), raw)


def test_the_properties_see_each_outcome(tmp_path: Path) -> None:
    """The checks above are not vacuous: a real file is read, garbage is moved aside, and a foreign one refused."""
    outcomes = []
    for n, raw in enumerate([real_history(), b"grocery list" * 50, _foreign_database(tmp_path)]):
        folder = tmp_path / f"case{n}"
        folder.mkdir()
        outcomes.append(check_history_bytes(folder, raw))
    assert outcomes == ["read", "set aside", "refused"]
    folder = tmp_path / "log"
    folder.mkdir()
    assert check_apply_bytes(folder, real_apply_log()) == "read"


def _foreign_database(tmp_path: Path) -> bytes:
    path = tmp_path / "foreign.sqlite3"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE recipes (name TEXT)")
    conn.commit()
    conn.close()
    return path.read_bytes()


def test_a_table_name_that_is_not_text_is_damage_for_both_files(tmp_path: Path) -> None:
    """SQLite's message then quotes bytes that are not UTF-8, and Python's sqlite3 raises UnicodeDecodeError."""
    for n, (real, table) in enumerate([(real_history(), b"runs"), (real_apply_log(), b"apply_checks")]):
        at = real.find(b"table" + table + table)
        assert at > 0
        raw = bytearray(real)
        raw[at + len(b"table") + 1] = 0xC5  # the first byte of a two-byte character, then no second byte
        folder = tmp_path / f"case{n}"
        folder.mkdir()
        check = check_history_bytes if n == 0 else check_apply_bytes
        assert check(folder, bytes(raw)) == "set aside"
