"""runtime_allowance.json on a real file system: written atomically, read back, and a damaged file reported
and set aside (never a crash), a damaged entry left out with the others kept."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from app.adapters.storage.allowance_store import ALLOWANCE_FILE_NAME, AllowanceStore
from app.core.memory.allowance import AllowanceSource
from app.core.memory.allowance_learning import LearnedAllowance
from app.core.telemetry import GpuInfo
from app.core.units import MIB
from app.services.runtime_learner import RuntimeLearner

H200 = LearnedAllowance("NVIDIA H200", "580.159.04", (588 * MIB, 592 * MIB), 7, "2026-12-02T15:40:00+00:00")
RTX = LearnedAllowance("NVIDIA GeForce RTX 4090", "580.95.05", (430 * MIB,), 1, "2026-12-01T09:00:00+00:00")


def test_saved_and_read_back(tmp_path: Path) -> None:
    store = AllowanceStore(tmp_path / "cfg")
    assert store.load() == [] and store.problem == ""  # no file yet: nothing learnt, nothing wrong
    assert store.save([H200, RTX])
    assert AllowanceStore(tmp_path / "cfg").load() == [H200, RTX]
    document = json.loads((tmp_path / "cfg" / ALLOWANCE_FILE_NAME).read_text())
    assert document["version"] == 1 and document["cards"][0]["recent_bytes"] == [588 * MIB, 592 * MIB]
    assert [p.name for p in (tmp_path / "cfg").iterdir()] == [ALLOWANCE_FILE_NAME]  # no temp file left


def test_a_save_replaces_the_file_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = AllowanceStore(tmp_path)
    store.save([H200])
    before = (tmp_path / ALLOWANCE_FILE_NAME).read_bytes()

    def fail(*_args: object) -> None:
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "replace", fail)  # the rename that would have put the new file in place fails

    assert not store.save([H200, RTX])
    assert "No space left on device" in store.problem
    assert (tmp_path / ALLOWANCE_FILE_NAME).read_bytes() == before  # the old content, whole
    assert [p.name for p in tmp_path.iterdir()] == [ALLOWANCE_FILE_NAME]


@pytest.mark.parametrize("content", [b'{"version": 1, "cards": [', b"[1, 2]", b'{"version": 1}', b"\xff\xfe"])
def test_a_damaged_file_is_reported_set_aside_and_the_default_priced(tmp_path: Path, content: bytes) -> None:
    (tmp_path / ALLOWANCE_FILE_NAME).write_bytes(content)
    store = AllowanceStore(tmp_path)
    learner = RuntimeLearner(store, GpuInfo("NVIDIA H200", "580.159.04", 143771.0))

    assert learner.allowance().source is AllowanceSource.DEFAULT
    assert learner.problem.startswith(f"{ALLOWANCE_FILE_NAME} was damaged (") and "learnt again" in learner.problem
    kept = [p for p in tmp_path.iterdir() if p.name.startswith(f"{ALLOWANCE_FILE_NAME}.unreadable-")]
    assert len(kept) == 1 and kept[0].read_bytes() == content
    assert store.save([H200]) and AllowanceStore(tmp_path).load() == [H200]  # the next load is kept again


def test_a_damaged_entry_is_left_out_and_the_others_kept(tmp_path: Path) -> None:
    good = {"gpu_name": H200.gpu_name, "driver": H200.driver, "recent_bytes": list(H200.recent_bytes),
            "loads": H200.loads, "learned_at": H200.learned_at}
    bad = [dict(good, recent_bytes=[-1]), dict(good, recent_bytes=[5 * 1024 * MIB]), dict(good, recent_bytes=[]),
           dict(good, gpu_name=7), dict(good, loads=1), dict(good, recent_bytes=[1.5]), "card", None]
    (tmp_path / ALLOWANCE_FILE_NAME).write_text(json.dumps({"version": 1, "cards": [*bad, good]}))
    store = AllowanceStore(tmp_path)
    assert store.load() == [H200]
    assert store.problem == f"{ALLOWANCE_FILE_NAME}: 8 damaged entries were left out"


def test_an_unreadable_file_is_reported_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / ALLOWANCE_FILE_NAME
    path.mkdir()  # not a file at all: it cannot be read, and is no file to set aside
    store = AllowanceStore(tmp_path)
    assert store.load() == [] and store.problem.startswith(f"could not read {path} (") and path.is_dir()
    assert not store.save([H200]) and "could not save" in store.problem
