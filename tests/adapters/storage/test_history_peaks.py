"""The server's own peak VRAM and the card's in the benchmark history (format 4): kept in columns of their own and
given back with the run; a format-3 file, whose points hold the card's peak as "vram_peak_mib" (the figure the
tables called Peak VRAM then), is read as it is (the card's as the card's, the server's own as not recorded, never
the card's in its place) and brought to format 4 by its first write, which fills the columns from each point."""

from __future__ import annotations

import json
import sqlite3
import zlib
from dataclasses import replace
from pathlib import Path

from app.adapters.storage.history import SCHEMA_VERSION, BenchHistory
from app.core.bench.sweep import GpuFigures, ServerPeakUnknown
from tests.adapters.storage.test_history import make_run

CARD_MIB, SERVER_MIB = 134_758.0, 15_872.0  # an H200 with another program on it, and the server's own share


def _measured() -> object:
    run = make_run()
    results = tuple(replace(r, gpu=GpuFigures(card_peak_mib=CARD_MIB + r.point.index, server_peak_mib=SERVER_MIB
                                              + r.point.index, util_mean_pct=90.0)) if r.ran else r
                    for r in run.results)
    return replace(run, results=results)


def _as_format_3(path: Path, server_kept: bool) -> None:
    """Make the file what the previous release wrote: no peak columns, each point's figures with the card's peak as
    "vram_peak_mib" (and the server's as "server_peak_mib" where that release kept it), user_version 3."""
    db = sqlite3.connect(path)
    rows = db.execute("SELECT run_id, idx, doc, card_peak_mib, server_peak_mib FROM points").fetchall()
    for run_id, idx, blob, card, server in rows:
        doc = json.loads(zlib.decompress(blob))
        gpu = {k: v for k, v in doc["gpu"].items() if k not in ("card_baseline_mib", "server_unknown")}
        gpu["vram_peak_mib"], gpu["vram_baseline_mib"] = card, None
        if server_kept:
            gpu["server_peak_mib"] = server
        doc["gpu"] = gpu
        db.execute("UPDATE points SET doc = ? WHERE run_id = ? AND idx = ?",
                   (zlib.compress(json.dumps(doc).encode()), run_id, idx))
    db.commit()
    db.execute("ALTER TABLE points DROP COLUMN server_peak_mib")
    db.execute("ALTER TABLE points DROP COLUMN card_peak_mib")
    db.execute("PRAGMA user_version = 3")
    db.commit()
    db.close()


def _format(path: Path) -> tuple[int, set[str]]:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        version = db.execute("PRAGMA user_version").fetchone()[0]
        columns = {row[1] for row in db.execute("PRAGMA table_info(points)")}
    db.close()
    return version, columns


def test_the_servers_peak_and_the_cards_come_back_from_their_columns(tmp_path: Path) -> None:
    path = tmp_path / "benchmarks.sqlite3"
    run = _measured()
    run_id = BenchHistory(path).save(run)
    assert _format(path)[0] == SCHEMA_VERSION == 4
    with sqlite3.connect(path) as db:
        kept = db.execute("SELECT server_peak_mib, card_peak_mib FROM points ORDER BY idx").fetchall()
    db.close()
    assert kept == [(SERVER_MIB, CARD_MIB), (SERVER_MIB + 1, CARD_MIB + 1), (None, None)]
    loaded = BenchHistory(path).load(run_id)
    assert [r.gpu for r in loaded.results] == [r.gpu for r in run.results]


def test_a_format_3_file_is_read_as_it_is_and_converted_by_its_first_write(tmp_path: Path) -> None:
    path = tmp_path / "benchmarks.sqlite3"
    old_id = BenchHistory(path).save(_measured())
    _as_format_3(path, server_kept=False)
    before = path.read_bytes()
    history = BenchHistory(path)
    assert history.open() == []
    old = history.load(old_id)
    # The card's figure is the card's; the server's own was not recorded, and the card's does not stand in for it.
    assert [(r.gpu.card_peak_mib, r.gpu.server_peak_mib, r.gpu.server_unknown) for r in old.results[:2]] == [
        (CARD_MIB, None, ServerPeakUnknown.NOT_RECORDED), (CARD_MIB + 1, None, ServerPeakUnknown.NOT_RECORDED)]
    assert path.read_bytes() == before  # reading does not write (the previous release can still open it)

    new_id = history.save(_measured())
    version, columns = _format(path)
    assert version == SCHEMA_VERSION and {"server_peak_mib", "card_peak_mib", "events"} <= columns
    again = BenchHistory(path)
    assert again.problems == [] and [s.run_id for s in again.list_runs()] == [new_id, old_id]
    reread = again.load(old_id)  # filled from each point as it was kept
    assert [(r.gpu.card_peak_mib, r.gpu.server_peak_mib, r.gpu.server_unknown) for r in reread.results] == [
        (r.gpu.card_peak_mib, r.gpu.server_peak_mib, r.gpu.server_unknown) for r in old.results]
    assert [r.gpu.server_peak_mib for r in again.load(new_id).results] == [SERVER_MIB, SERVER_MIB + 1, None]


def test_a_format_3_point_that_kept_the_servers_share_gives_it_back_as_the_servers(tmp_path: Path) -> None:
    path = tmp_path / "benchmarks.sqlite3"
    old_id = BenchHistory(path).save(_measured())
    _as_format_3(path, server_kept=True)
    history = BenchHistory(path)
    first = history.load(old_id).results[0].gpu
    assert (first.server_peak_mib, first.card_peak_mib, first.server_unknown) == (SERVER_MIB, CARD_MIB, None)
    history.delete(old_id + 100)  # any write converts the file, and keeps what each point held
    assert _format(path)[0] == SCHEMA_VERSION
    assert BenchHistory(path).load(old_id).results[0].gpu == first
