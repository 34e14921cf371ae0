"""The presets file on a real disk: atomic saves, unreadable files set aside, nothing lost."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from app.adapters.storage.atomic_json import remove_stale_temp_files, write_json_atomic
from app.adapters.storage.preset_store import PresetSaveError, PresetStore
from app.core.console.presets import BUILTIN_PRESETS, Preset, builtin, edited


def test_no_file_means_the_built_ins(tmp_path: Path) -> None:
    loaded = PresetStore(tmp_path).load()
    assert loaded.presets == list(BUILTIN_PRESETS) and loaded.problems == []


def test_edits_survive_a_restart(tmp_path: Path) -> None:
    store = PresetStore(tmp_path / "new-folder")
    changed = edited(builtin("math-apples"), prompt="小明有20个苹果，每天吃四个，几天吃完？")
    presets = [changed if p.key == changed.key else p for p in BUILTIN_PRESETS]
    presets.append(Preset("user-mine", "Mine", "hello", think="high"))
    store.save(presets)
    assert PresetStore(tmp_path / "new-folder").load().presets == presets
    saved = json.loads(store.path.read_text("utf-8"))
    assert "小明有20个苹果" in store.path.read_text("utf-8")  # readable, not \u-escaped
    assert [p["key"] for p in saved["presets"]] == ["math-apples", "user-mine"]


def test_an_unreadable_file_is_moved_aside_and_reported(tmp_path: Path) -> None:
    store = PresetStore(tmp_path)
    store.path.write_text('{"version": 1, "presets": [', "utf-8")
    loaded = store.load()
    assert loaded.presets == list(BUILTIN_PRESETS)
    [problem] = loaded.problems
    kept = [p for p in tmp_path.iterdir() if p.name.startswith("presets.json.corrupt-")]
    assert len(kept) == 1 and str(kept[0]) in problem and "not valid JSON" in problem
    assert kept[0].read_text("utf-8") == '{"version": 1, "presets": ['
    assert not store.path.exists()


@pytest.mark.parametrize("failing", ["replace", "fsync"])
def test_a_failed_save_leaves_the_old_file_and_no_temp_files(tmp_path: Path, monkeypatch, failing: str) -> None:
    store = PresetStore(tmp_path)
    mine = Preset("user-a", "A", "first")
    store.save([*BUILTIN_PRESETS, mine])
    before = store.path.read_bytes()

    def disk_full(*_args, **_kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, failing, disk_full)
    with pytest.raises(PresetSaveError) as caught:
        store.save([*BUILTIN_PRESETS, edited(mine, prompt="second")])
    monkeypatch.undo()
    assert "No space left on device" in caught.value.message and str(store.path) in caught.value.message
    assert store.path.read_bytes() == before
    assert list(tmp_path.glob(".presets.json.*.tmp")) == []


def test_stale_temp_files_are_cleaned_and_fresh_ones_left(tmp_path: Path) -> None:
    target = tmp_path / "x.json"
    write_json_atomic(target, {"a": 1})
    stale, fresh = tmp_path / ".x.json.dead.tmp", tmp_path / ".x.json.live.tmp"
    stale.write_text("")
    fresh.write_text("")
    os.utime(stale, (0, 0))
    remove_stale_temp_files(target)
    assert not stale.exists() and fresh.exists()
    assert json.loads(target.read_text()) == {"a": 1}
