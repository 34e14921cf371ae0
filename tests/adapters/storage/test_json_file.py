"""The one reader of the JSON state files, on a real file system."""

from __future__ import annotations

import os
from pathlib import Path

from app.adapters.storage.json_file import MISSING, READ, SET_ASIDE, STUCK, UNREADABLE, decode_json, read_json_file


def test_a_missing_file_and_a_good_one(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    assert read_json_file(path, "corrupt").outcome == MISSING
    path.write_text('{"a": [1, "é"]}', "utf-8")
    found = read_json_file(path, "corrupt")
    assert found.outcome == READ and found.ok and found.data == {"a": [1, "é"]}
    assert found.raw == path.read_bytes()


def test_bad_json_is_moved_aside_under_a_timestamped_name(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    path.write_bytes(b'{"a": 1')
    found = read_json_file(path, "corrupt")
    assert found.outcome == SET_ASIDE and not found.ok and not path.exists()
    assert found.kept is not None and found.kept.read_bytes() == b'{"a": 1'
    stamp = found.kept.name.removeprefix("state.json.corrupt-")
    assert len(stamp) == 16 and stamp.endswith("Z") and stamp[8] == "T"
    assert found.why.startswith("it is not valid JSON (") and "line 1 column" in found.why


def test_a_document_of_the_wrong_shape_is_moved_aside_with_the_reason(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    path.write_text("[1, 2]", "utf-8")
    found = read_json_file(path, "unreadable", lambda data: "" if isinstance(data, dict) else "not an object")
    assert found.outcome == SET_ASIDE and found.why == "not an object"
    assert found.kept.name.startswith("state.json.unreadable-")


def test_a_file_that_cannot_be_read_is_left_where_it_is(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    path.mkdir()  # reading a folder fails like an unreadable file does
    found = read_json_file(path, "corrupt")
    assert found.outcome == UNREADABLE and found.why and path.is_dir()


def test_a_bad_file_that_cannot_be_moved_is_reported_and_left(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "state.json"
    path.write_bytes(b"\xff")

    def refuse(*_args: object) -> None:
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(os, "replace", refuse)
    found = read_json_file(path, "corrupt")
    monkeypatch.undo()
    assert found.outcome == STUCK and found.move_error == "Read-only file system"
    assert found.why == "it is not valid JSON (it is not UTF-8 text)" and path.read_bytes() == b"\xff"


def test_stale_temp_files_of_dead_saves_are_removed_first(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    stale = tmp_path / ".state.json.dead.tmp"
    stale.write_text("{", "utf-8")
    os.utime(stale, (0, 0))
    read_json_file(path, "corrupt")
    assert not stale.exists()


def test_decode_json_says_why() -> None:
    assert decode_json(b'{"x": 2}') == ({"x": 2}, "")
    assert decode_json(b"nope")[1] == "it is not valid JSON (Expecting value, line 1 column 1)"
