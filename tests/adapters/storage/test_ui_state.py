"""window.json: where the window was left, written atomically; bad content never stops the app."""

from __future__ import annotations

import json

from app.adapters.storage.ui_state import UiState, UiStateStore


def test_a_state_survives_a_round_trip(tmp_path) -> None:
    store = UiStateStore(tmp_path / "cfg")
    assert store.load() == UiState()  # nothing saved yet
    state = UiState(page="bench", geometry=b"\x01\xd9\xd0\xcb\x00\x03", markdown=False)
    assert store.save(state)
    assert UiStateStore(tmp_path / "cfg").load() == state
    assert json.loads(store.path.read_text())["version"] == 1


def test_each_bad_field_falls_back_on_its_own(tmp_path) -> None:
    store = UiStateStore(tmp_path)
    store.path.write_text(json.dumps({"page": 7, "geometry": "not base64!", "markdown": False}))
    assert store.load() == UiState(page=None, geometry=None, markdown=False)


def test_an_unreadable_file_is_moved_aside(tmp_path) -> None:
    store = UiStateStore(tmp_path)
    store.path.write_bytes(b"\xff\xfe garbage")
    assert store.load() == UiState()
    assert not store.path.exists() and len(list(tmp_path.glob("window.json.unreadable-*"))) == 1


def test_a_folder_that_cannot_be_written_is_reported_not_raised(tmp_path) -> None:
    blocker = tmp_path / "cfg"
    blocker.write_text("a file where the folder should be")
    assert UiStateStore(blocker).save(UiState(page="server")) is False


def test_recent_files_survive_and_bad_entries_are_dropped_one_by_one(tmp_path) -> None:
    from app.adapters.storage.ui_state import MAX_RECENT_FILES, with_recent

    store = UiStateStore(tmp_path)
    state = UiState(recent_files=("/models/a.gguf", "/models/b.gguf"))
    assert store.save(state) and store.load() == state
    store.path.write_text(json.dumps({"recent_files": ["/m/ok.gguf", 7, "", "x" * 5000, "/m/ok.gguf", "a\0b",
                                                       "/m/two.gguf"]}))
    assert store.load().recent_files == ("/m/ok.gguf", "/m/two.gguf")
    store.path.write_text(json.dumps({"recent_files": "/not/a/list.gguf", "page": "server"}))
    assert store.load() == UiState(page="server")
    recent: tuple[str, ...] = ()
    for n in range(MAX_RECENT_FILES + 3):
        recent = with_recent(recent, f"/m/{n}.gguf")
    assert len(recent) == MAX_RECENT_FILES and recent[0] == f"/m/{MAX_RECENT_FILES + 2}.gguf"
    assert with_recent(recent, "/m/5.gguf")[:2] == ("/m/5.gguf", recent[0]) and with_recent(recent, " ") == recent


def test_the_exporters_port_is_kept_while_on_and_a_bad_one_reads_as_off(tmp_path) -> None:
    store = UiStateStore(tmp_path)
    assert store.save(UiState(exporter_port=9464))
    assert store.load().exporter_port == 9464
    assert store.save(UiState())
    assert "exporter_port" not in json.loads(store.path.read_text())  # off: the file of an earlier release
    for bad in (80, 70000, "9464", True, 9464.0, None):
        store.path.write_text(json.dumps({"page": "server", "exporter_port": bad}))
        assert store.load() == UiState(page="server"), bad
