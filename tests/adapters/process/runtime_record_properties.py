"""The property the fuzz tests check over the runtime records of started servers, as plain functions a
longer run can reuse (benchmarks/fuzz_inputs.py runs thousands of examples with them).

Records are state files the app reads at every probe and acts on: a record judged "left behind"
may have its processes stopped. So the inputs are arbitrary bytes, arbitrary JSON, and records
whose every field is hostile but which name real processes: this test process, its parent, pid 1,
and a bystander child started for the purpose, with their true start times and command lines or
slightly wrong ones.

Property: reading the folder and surveying it never raises; every record read names a real
process id, port and finite times; the bystander is never signalled (it is nobody's server, and
its record can only ever match it as a reused pid or a server still owned by a live app); a
record that is removed is one whose server is gone or whose pid was reused.
"""

from __future__ import annotations

import atexit
import json
import math
import subprocess
import sys
from pathlib import Path

import psutil
from hypothesis import strategies as st

from app.adapters.process import orphans
from app.adapters.process.runtime_record import RECORD_FORMAT, RECORD_PREFIX, RECORD_SUFFIX, MAX_PID, RecordBook
from tests.fakes.raw_http import closed_port

_BYSTANDER: subprocess.Popen[bytes] | None = None


def bystander() -> psutil.Process:
    """A live child process that no record may ever get signalled (started once per test run)."""
    global _BYSTANDER
    if _BYSTANDER is None or _BYSTANDER.poll() is not None:
        _BYSTANDER = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                                      stdin=subprocess.PIPE)
        atexit.register(_BYSTANDER.kill)
    return psutil.Process(_BYSTANDER.pid)


def _dead_pid() -> int:
    return max(p.pid for p in psutil.process_iter()) + 1_000  # above every pid in use


def _real_processes() -> list[psutil.Process]:
    found = [bystander(), psutil.Process()]
    for pid in (psutil.Process().ppid(), 1):
        try:
            found.append(psutil.Process(pid))
        except psutil.Error:
            continue
    return found


def _identity(proc: psutil.Process) -> tuple[int, float, list[str]]:
    try:
        return proc.pid, proc.create_time(), proc.cmdline()
    except psutil.Error:
        return proc.pid, 0.0, []


NUMBERS = st.one_of(st.integers(-2**70, 2**70), st.floats(allow_nan=True, allow_infinity=True),
                    st.sampled_from([0, -1, 1, MAX_PID, MAX_PID + 1, 65535, 65536, True, False]))
JUNK = st.one_of(st.none(), st.booleans(), NUMBERS, st.text(max_size=20), st.lists(st.integers(), max_size=3),
                 st.dictionaries(st.text(max_size=5), st.integers(), max_size=2))


@st.composite
def hostile_record(draw: st.DrawFn) -> dict[str, object]:
    """A record naming a real process (true or nearly true identity), with any field replaced by junk."""
    proc = draw(st.sampled_from(_real_processes()))
    pid, created, cmdline = _identity(proc)
    app_pid, app_created, _ = _identity(draw(st.sampled_from(_real_processes())))
    document: dict[str, object] = {
        "format": RECORD_FORMAT, "backend": "ollama", "pid": pid,
        "create_time": created + draw(st.sampled_from([0.0, 0.5, 2.0, -3600.0])),
        "cmdline": draw(st.sampled_from([cmdline, cmdline[:1], [*cmdline, "serve"], ["ollama", "serve"]])),
        "host": draw(st.sampled_from(["127.0.0.1", "localhost", "::1", "0.0.0.0", ""])),
        "port": closed_port(), "base_url": "http://127.0.0.1:1",
        "app_pid": draw(st.sampled_from([app_pid, _dead_pid()])),
        "app_create_time": app_created, "started_at": 0.0, "dies_with_app": draw(st.booleans()),
        "log_path": draw(st.sampled_from([None, "", "/nonexistent/server.log"])),
    }
    for key in draw(st.lists(st.sampled_from(sorted(document)), max_size=3, unique=True)):
        if draw(st.booleans()):
            document[key] = draw(JUNK)
        else:
            del document[key]
    return document


def record_bytes() -> st.SearchStrategy[bytes]:
    """Bytes of one record file: arbitrary, arbitrary JSON, deep nesting, or a hostile record."""
    json_values = st.recursive(st.none() | st.booleans() | NUMBERS | st.text(max_size=10),
                               lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner,
                                                                                          max_size=4), max_leaves=12)
    return st.one_of(
        st.binary(max_size=256),
        json_values.map(lambda v: json.dumps(v).encode()),
        st.integers(1, 5000).map(lambda depth: b"[" * depth + b"]" * depth),
        hostile_record().map(lambda doc: json.dumps(doc).encode()),
    )


def check_record_bytes(folder: Path, raw: bytes) -> str:
    """Write raw as a record, read and survey the folder, and assert the property; the verdicts seen."""
    book = RecordBook(folder / "run")
    book.folder.mkdir(parents=True, exist_ok=True)
    path = book.folder / f"{RECORD_PREFIX}ollama-1{RECORD_SUFFIX}"
    path.write_bytes(raw)
    watched = bystander()
    records = book.load_all()
    for record in records:
        assert record.problem() == "", record
        assert 1 <= record.pid <= MAX_PID and 1 <= record.port <= 65535
        assert all(math.isfinite(t) for t in (record.create_time, record.app_create_time, record.started_at))
    verdicts = [orphans.inspect(r).verdict for r in records]
    survey = orphans.survey(book, "ollama", "127.0.0.1", records[0].port if records else 1, grace_s=0.5)
    assert watched.is_running() and watched.status() != psutil.STATUS_ZOMBIE, f"the bystander was stopped by {raw!r}"
    assert watched.pid not in survey.reaped, raw
    still = {(r.pid, r.create_time) for r in book.load_all()}
    for record, verdict in zip(records, verdicts):
        kept = (record.pid, record.create_time) in still
        if verdict in (orphans.Verdict.STALE, orphans.Verdict.REUSED):
            assert not kept, f"a record of a {verdict.name} server was kept"
        if verdict in (orphans.Verdict.OWNED, orphans.Verdict.ORPHAN):
            assert kept, f"an {verdict.name} server's record was removed"
    return ",".join(v.name for v in verdicts) or "unreadable"


__all__ = ["bystander", "check_record_bytes", "hostile_record", "record_bytes"]
