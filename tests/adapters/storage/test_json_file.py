"""The one reader of the JSON state files, on a real file system."""

from __future__ import annotations

import os
from pathlib import Path

from app.adapters.storage.atomic_json import json_bytes, keep_copy
from app.adapters.storage.json_file import (MAX_DEPTH, MISSING, READ, SET_ASIDE, STUCK, UNREADABLE, decode_json,
                                            nesting_depth, read_json_file)


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


def test_nesting_is_counted_outside_strings_only() -> None:
    assert nesting_depth(b'[[{"a": "]]]}}"}, "[[[["]]') == 3
    assert nesting_depth(b'["\\\\", [["\\\\\\"[[["]]]') == 3  # an escaped backslash, then an escaped quote
    assert nesting_depth(b"[" * MAX_DEPTH + b"]" * MAX_DEPTH) == MAX_DEPTH
    assert decode_json(b"[" * MAX_DEPTH + b"]" * MAX_DEPTH)[1] == ""
    assert "nested too deeply" in decode_json(b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1))[1]


def test_decode_json_reads_a_byte_order_mark_nan_and_surrogate_pairs() -> None:
    assert decode_json(b'\xef\xbb\xbf{"a": 1}') == ({"a": 1}, "")
    data, why = decode_json(b'[NaN, -Infinity, 1e400, "\\ud83d\\ude00", "\\\\ud800"]')
    assert why == "" and data[0] != data[0] and data[1] == float("-inf") and data[3] == "\U0001f600"
    assert data[4] == "\\ud800"  # an escaped backslash before "ud800" is plain text


def test_writing_text_with_a_lone_surrogate_does_not_fail() -> None:
    raw = json_bytes({"title": "a\ud800b"})
    assert decode_json(raw) == ({"title": "a\ufffdb"}, "")


def test_a_copy_with_the_same_bytes_is_reused(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    first = keep_copy(path, b"one", "backup")
    assert keep_copy(path, b"one", "backup") == first == tmp_path / "state.json.backup"
    second = keep_copy(path, b"two", "backup")
    assert second == tmp_path / "state.json.backup-2" and second.read_bytes() == b"two"
