"""Each named kind of damaged or foreign state file, through the real stores on a real disk: what is
read, what is kept (and where), and what the user is told."""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from app.adapters.storage.json_file import MAX_DEPTH
from app.adapters.storage.preset_store import PresetSaveError, PresetStore
from app.adapters.storage.settings_store import SettingsStore
from app.adapters.storage.ui_state import UiState, UiStateStore
from app.backends.ollama.tuning import OLLAMA_TUNING, ollama_settings
from app.core.console.presets import BUILTIN_PRESETS, Preset
from app.core.server.settings import SETTINGS_VERSION, ServerSettings

DEEP = [b"[" * 100_000, b'{"a":' * 100_000, b'{"a": ' + b"[" * 5_000 + b"]" * 5_000 + b"}"]
TOO_DEEP = f"it is nested too deeply (more than {MAX_DEPTH} levels of brackets)"


def _only(folder: Path, pattern: str) -> Path:
    [found] = folder.glob(pattern)
    return found


@pytest.mark.parametrize("raw", DEEP, ids=["brackets", "objects", "inside-a-value"])
def test_deeply_nested_settings_are_moved_aside_with_the_reason(tmp_path: Path, raw: bytes) -> None:
    store = SettingsStore(tmp_path, OLLAMA_TUNING)
    store.path.write_bytes(raw)
    result = store.load()
    assert result.settings == ServerSettings(backend="ollama")
    kept = _only(tmp_path, "settings.json.corrupt-*")
    assert kept.read_bytes() == raw and result.backup_path == kept
    assert result.problems == [f"{store.path} could not be read because {TOO_DEEP}. It was moved to {kept}; "
                               "using default settings."]
    store.save(result.settings)
    assert SettingsStore(tmp_path, OLLAMA_TUNING).load().problems == [] and kept.read_bytes() == raw


@pytest.mark.parametrize("raw", DEEP, ids=["brackets", "objects", "inside-a-value"])
def test_deeply_nested_presets_are_moved_aside_with_the_reason(tmp_path: Path, raw: bytes) -> None:
    store = PresetStore(tmp_path)
    store.path.write_bytes(raw)
    loaded = store.load()
    assert loaded.presets == list(BUILTIN_PRESETS)
    kept = _only(tmp_path, "presets.json.corrupt-*")
    assert kept.read_bytes() == raw
    assert loaded.problems == [f"{store.path} could not be read because {TOO_DEEP}; it was moved to {kept}. "
                               "Showing the built-in presets."]
    assert store.save(loaded.presets) == [] and kept.read_bytes() == raw


@pytest.mark.parametrize("raw", DEEP, ids=["brackets", "objects", "inside-a-value"])
def test_deeply_nested_window_state_is_moved_aside_and_logged(tmp_path: Path, raw: bytes, caplog) -> None:
    store = UiStateStore(tmp_path)
    store.path.write_bytes(raw)
    assert store.load() == UiState()
    kept = _only(tmp_path, "window.json.unreadable-*")
    assert kept.read_bytes() == raw
    assert f"({TOO_DEEP}); moved to {kept.name}, the window opens with its defaults" in caplog.text
    assert store.save(UiState(page="server")) and UiStateStore(tmp_path).load() == UiState(page="server")


def test_brackets_inside_text_do_not_count_as_nesting(tmp_path: Path) -> None:
    store = PresetStore(tmp_path)
    prompt = "[{" * 1000 + 'a "quoted" \\ part'
    store.save([*BUILTIN_PRESETS, Preset("user-brackets", "Brackets", prompt)])
    loaded = PresetStore(tmp_path).load()
    assert loaded.problems == [] and loaded.presets[-1].prompt == prompt


def test_a_settings_file_with_a_byte_order_mark_is_read_not_set_aside(tmp_path: Path) -> None:
    store = SettingsStore(tmp_path, OLLAMA_TUNING)
    document = {"version": SETTINGS_VERSION, "backend": "ollama", "settings": {"num_parallel": 4, "host": "localhost"},
                "backends": {"ollama": {"models_dir": "/srv/models"}}, "preferences": {"theme": "dark"}}
    store.path.write_bytes(b"\xef\xbb\xbf" + json.dumps(document).encode("utf-8"))
    result = store.load()
    assert result.problems == [] and result.backup_path is None
    assert result.settings == ollama_settings(ServerSettings(backend="ollama", num_parallel=4, host="localhost"), models_dir="/srv/models")
    assert result.preferences == {"theme": "dark"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["settings.json"]
    store.save(result.settings)
    assert not store.path.read_bytes().startswith(b"\xef\xbb\xbf")  # written as plain UTF-8


def test_version_1_point_0_is_read_as_format_1(tmp_path: Path) -> None:
    store = SettingsStore(tmp_path, OLLAMA_TUNING)
    store.path.write_text('{"version": 1.0, "settings": {"num_parallel": 3, "max_loaded_models": 2}}', "utf-8")
    original = store.path.read_bytes()
    result = store.load()
    assert result.settings == ollama_settings(ServerSettings(backend="ollama", num_parallel=3), max_loaded_models=2)
    assert result.backup_path == tmp_path / "settings.json.v1-backup" and result.backup_path.read_bytes() == original
    assert result.problems[0].startswith(f"{store.path} was in format version 1; converted it to version 2")
    assert json.loads(store.path.read_text("utf-8"))["version"] == SETTINGS_VERSION


def test_version_2_point_0_is_the_current_format(tmp_path: Path) -> None:
    store = SettingsStore(tmp_path, OLLAMA_TUNING)
    store.path.write_text('{"version": 2.0, "backend": "ollama", "settings": {"num_parallel": 5}}', "utf-8")
    result = store.load()
    assert result.problems == [] and result.settings == ServerSettings(backend="ollama", num_parallel=5)


@pytest.mark.parametrize("version, shown", [("1.5", "1.5"), ('"1"', "'1'"), ("true", "True"), ("-1", "-1"),
                                            ("1e300", "1e+300")])
def test_a_version_that_is_not_a_whole_number_is_unusable_and_says_so(tmp_path: Path, version: str,
                                                                       shown: str) -> None:
    store = SettingsStore(tmp_path)
    raw = f'{{"version": {version}, "settings": {{"num_parallel": 3}}}}'.encode()
    store.path.write_bytes(raw)
    result = store.load()
    assert result.settings == ServerSettings(backend="ollama") and result.backup_path.read_bytes() == raw
    assert f"because its version {shown} is not" in result.problems[0]


def test_a_version_no_release_could_have_written_is_damage(tmp_path: Path) -> None:
    store = SettingsStore(tmp_path)
    store.path.write_text('{"version": ' + "7" * 4000 + ', "settings": {}}', "utf-8")
    result = store.load()
    assert "its version <a whole number of 4000 digits> is not one any ollama-deck wrote" in result.problems[0]
    assert result.backup_path.name.startswith("settings.json.corrupt-")


NEWER_PRESETS = {
    "version": 2,
    "presets": [
        {"key": "user-a", "title": "A", "prompt": "hi", "tags": ["work"], "model": "qwen3:14b"},
        {"key": "user-img", "kind": "image", "title": "Picture", "prompt": "a cat", "think": "vision"},
        {"key": "math-apples", "prompt": "小明有20个苹果？"},
    ],
    "folders": [{"name": "work", "keys": ["user-a"]}],
}


def test_presets_from_a_newer_version_are_read_kept_and_copied(tmp_path: Path) -> None:
    store = PresetStore(tmp_path)
    store.path.write_text(json.dumps(NEWER_PRESETS, ensure_ascii=False), "utf-8")
    original = store.path.read_bytes()
    loaded = store.load()

    by_key = {p.key: p for p in loaded.presets}
    assert by_key["user-a"].prompt == "hi" and by_key["math-apples"].prompt == "小明有20个苹果？"
    assert "user-img" not in by_key
    copy = tmp_path / "presets.json.v2-backup"
    assert copy.read_bytes() == original and store.path.read_bytes() == original  # reading writes nothing over it
    assert loaded.problems == [
        "The presets file was written by a newer version (format 2); reading what this version understands.",
        "Skipped a saved preset: 'user-img': think must be true, false, \"low\", \"medium\" or \"high\", "
        "not 'vision'.",
        f"The skipped entry stays in {store.path} as written when presets are saved; fix or delete it there.",
        f"Saving will write format 1 and keep what this version does not understand in it; the newer file is "
        f"kept as it was at {copy}.",
    ]

    assert store.save(loaded.presets) == []
    written = json.loads(store.path.read_text("utf-8"))
    assert written["version"] == 1 and written["folders"] == NEWER_PRESETS["folders"]
    assert written["presets"][0] == NEWER_PRESETS["presets"][1]  # the entry it cannot use, verbatim
    entry_a = next(e for e in written["presets"] if e["key"] == "user-a")
    assert entry_a["tags"] == ["work"] and entry_a["model"] == "qwen3:14b"
    assert copy.read_bytes() == original
    store.save(loaded.presets)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["presets.json", "presets.json.v2-backup"]


def test_a_preset_entry_of_the_wrong_type_is_reported_and_kept_in_the_file(tmp_path: Path) -> None:
    store = PresetStore(tmp_path)
    wrong = {"key": "user-a", "title": "A", "prompt": "hi", "num_predict": "lots"}
    store.path.write_text(json.dumps({"version": 1, "presets": [wrong, {"key": "user-b", "title": "B",
                                                                         "prompt": "fine"}]}), "utf-8")
    loaded = store.load()
    assert [p.key for p in loaded.presets][-1] == "user-b" and "user-a" not in {p.key for p in loaded.presets}
    assert loaded.problems == [
        "Skipped a saved preset: 'user-a': num_predict must be a whole number from 1 to 2147483647 or null, "
        "not 'lots'.",
        f"The skipped entry stays in {store.path} as written when presets are saved; fix or delete it there.",
    ]
    store.save([*loaded.presets, Preset("user-c", "C", "new")])
    written = json.loads(store.path.read_text("utf-8"))["presets"]
    assert written[0] == wrong and [e["key"] for e in written] == ["user-a", "user-b", "user-c"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["presets.json"]  # nothing lost, so no copy needed


def test_presets_holding_a_list_are_moved_aside_with_the_reason(tmp_path: Path) -> None:
    store = PresetStore(tmp_path)
    raw = json.dumps([{"key": "user-a", "title": "A", "prompt": "hi"}]).encode("utf-8")
    store.path.write_bytes(raw)
    loaded = store.load()
    assert loaded.presets == list(BUILTIN_PRESETS)
    kept = _only(tmp_path, "presets.json.corrupt-*")
    assert kept.read_bytes() == raw
    assert loaded.problems == [f"{store.path} could not be read because it holds a list, not an object with a "
                               f"\"presets\" list; it was moved to {kept}. Showing the built-in presets."]
    store.save(loaded.presets)
    assert kept.read_bytes() == raw


@pytest.mark.parametrize("document, reason", [
    ({"version": "1", "presets": []}, "its version '1' is not a whole number from 0 to 10000"),
    ({"version": 1, "presets": {"user-a": {}}}, "its \"presets\" entry is not a list"),
    ("text", "it holds a JSON str, not an object"),
])
def test_presets_of_another_shape_are_moved_aside(tmp_path: Path, document, reason: str) -> None:
    store = PresetStore(tmp_path)
    store.path.write_text(json.dumps(document), "utf-8")
    [problem] = store.load().problems
    assert reason in problem and str(_only(tmp_path, "presets.json.corrupt-*")) in problem


def test_deleting_a_preset_with_fields_this_version_does_not_know_keeps_a_copy(tmp_path: Path) -> None:
    store = PresetStore(tmp_path)
    store.path.write_text(json.dumps({"version": 1, "presets": [
        {"key": "user-a", "title": "A", "prompt": "hi", "tags": ["x"]}]}), "utf-8")
    original = store.path.read_bytes()
    loaded = store.load()
    assert loaded.problems == []
    [note] = store.save([p for p in loaded.presets if p.key != "user-a"])
    copy = _only(tmp_path, "presets.json.backup-*")
    assert copy.read_bytes() == original
    assert note == (f"The deleted presets 'user-a' had fields this version does not know; they are no longer in "
                    f"{store.path}, and the file as it was is kept at {copy}.")
    assert store.notices == [note]


def test_a_reset_built_in_keeps_its_unknown_fields_in_the_file(tmp_path: Path) -> None:
    store = PresetStore(tmp_path)
    store.path.write_text(json.dumps({"version": 1, "presets": [
        {"key": "math-apples", "prompt": "1+1?", "color": "red"}]}), "utf-8")
    loaded = store.load()
    reset = [p if p.key != "math-apples" else next(b for b in BUILTIN_PRESETS if b.key == p.key)
             for p in loaded.presets]
    assert store.save(reset) == []
    [entry] = json.loads(store.path.read_text("utf-8"))["presets"]
    assert entry["color"] == "red" and entry["prompt"] == "小明有10个苹果，每天吃两个，请问几天吃完？"
    assert PresetStore(tmp_path).load().presets == list(BUILTIN_PRESETS)


def test_a_presets_file_changed_since_it_was_read_is_copied_before_the_save(tmp_path: Path) -> None:
    store = PresetStore(tmp_path)
    loaded = store.load()
    store.path.write_text('{"version": 1, "presets": [{"key": "user-x", "title": "X", "prompt": "elsewhere"}]}',
                          "utf-8")
    outside = store.path.read_bytes()
    [note] = store.save(loaded.presets)
    copy = _only(tmp_path, "presets.json.backup-*")
    assert copy.read_bytes() == outside
    assert note == (f"{store.path} was changed since the presets were read; saving replaced it, and what it held "
                    f"is kept at {copy}.")


def test_a_presets_file_that_cannot_be_read_is_not_saved_over(tmp_path: Path) -> None:
    store = PresetStore(tmp_path)
    store.path.mkdir()  # reading a folder fails as an unreadable file does
    loaded = store.load()
    assert loaded.problems == [f"Could not read {store.path}: it is not a regular file; showing the built-in "
                               "presets. Saving will not replace it until it can be read."]
    with pytest.raises(PresetSaveError) as caught:
        store.save(loaded.presets)
    assert caught.value.message == (f"Did not save presets: {store.path} exists but could not be read (it is not "
                                    "a regular file), and saving would replace it unseen.")
    assert store.path.is_dir()


@pytest.mark.parametrize("make", ["settings", "presets", "window"])
def test_a_file_over_the_size_limit_is_set_aside_unread(tmp_path: Path, make: str) -> None:
    name = {"settings": "settings.json", "presets": "presets.json", "window": "window.json"}[make]
    with (tmp_path / name).open("wb") as handle:
        handle.truncate(17 * 1024 * 1024)  # sparse: no data to read, only a size
    store = {"settings": SettingsStore, "presets": PresetStore, "window": UiStateStore}[make](tmp_path)
    store.load()
    [kept] = [p for p in tmp_path.iterdir() if p.name != name]
    assert kept.stat().st_size == 17 * 1024 * 1024 and not (tmp_path / name).exists()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_a_named_pipe_in_place_of_a_file_is_reported_without_waiting(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "settings.json")
    [problem] = SettingsStore(tmp_path).load().problems
    assert problem.startswith(f"Could not read {tmp_path / 'settings.json'}: it is not a regular file.")


@pytest.mark.parametrize("raw, reason", [
    (b'{"version": 2, "settings": {"port": ' + b"9" * 5000 + b"}}", "it holds a number with too many digits"),
    (b'{"version": 2, "settings": {"host": "\\ud800"}}', "it holds text that is not valid Unicode"),
    (b'{"version": 2, "preferences": {"\\udfff": 1}}', "it holds text that is not valid Unicode"),
])
def test_numbers_and_text_python_cannot_carry_set_the_settings_aside(tmp_path: Path, raw: bytes, reason: str) -> None:
    store = SettingsStore(tmp_path)
    store.path.write_bytes(raw)
    result = store.load()
    assert reason in result.problems[0] and result.backup_path.read_bytes() == raw
    store.save(result.settings, result.preferences)  # the next save writes plain UTF-8
    assert SettingsStore(tmp_path).load().problems == []


def test_nan_and_infinity_options_are_refused_and_other_servers_keep_theirs(tmp_path: Path) -> None:
    store = SettingsStore(tmp_path, OLLAMA_TUNING)
    store.path.write_text('{"version": 2, "backend": "ollama", "settings": {}, "backends": {"ollama": '
                          '{"gpu_overhead_mib": NaN, "draft_p": Infinity}, "llama_server": {"rope": NaN}}}', "utf-8")
    result = store.load()
    assert result.settings == ServerSettings(backend="ollama")
    text = " ".join(result.problems)
    assert "Server option 'gpu_overhead_mib': the saved value nan is not a finite number" in text
    assert "Server option 'draft_p': the saved value inf is not a finite number" in text
    assert result.backup_path == tmp_path / "settings.json.invalid-backup"
    store.save(result.settings)
    assert "NaN" in json.dumps(json.loads(store.path.read_text("utf-8"))["backends"]["llama_server"])


def test_a_value_that_still_fails_to_convert_gives_defaults_and_a_copy(tmp_path: Path, monkeypatch) -> None:
    store = SettingsStore(tmp_path)
    store.path.write_text('{"version": 2, "settings": {"num_parallel": 2}}', "utf-8")

    def refuse(_data, _saved=None):
        raise ValueError("a value this build cannot convert")

    monkeypatch.setattr(ServerSettings, "from_json", staticmethod(refuse))
    result = store.load()
    assert result.settings == ServerSettings(backend="ollama")
    assert result.problems[0].startswith(f"{store.path} could not be read because a value in it could not be "
                                         "handled (ValueError). Using default settings. A copy of the file is kept")
    assert result.backup_path.read_text("utf-8") == '{"version": 2, "settings": {"num_parallel": 2}}'


def test_hostile_window_values_fall_back_one_by_one(tmp_path: Path) -> None:
    store = UiStateStore(tmp_path)
    store.path.write_text(json.dumps({"version": 10**30, "page": "p" * 100_000, "geometry": "A" * 100_000,
                                      "markdown": 1, "extra": [[[]]]}), "utf-8")
    assert store.load() == UiState()
    store.path.write_text(json.dumps({"page": "bench", "geometry": ["AdnQyw=="], "markdown": False}), "utf-8")
    assert store.load() == UiState(page="bench", markdown=False)
    store.path.write_text(json.dumps({"page": "bench", "geometry": "é" * 10}), "utf-8")
    assert store.load() == UiState(page="bench")


def test_a_preset_whose_output_cap_the_form_cannot_show_is_skipped(tmp_path: Path) -> None:
    store = PresetStore(tmp_path)
    store.path.write_text(json.dumps({"presets": [{"key": "user-a", "title": "A", "prompt": "hi",
                                                   "num_predict": 2**31}, {"key": "user-b", "title": "B",
                                                                           "prompt": "hi", "think": 1.0}]}), "utf-8")
    loaded = store.load()
    assert {p.key for p in loaded.presets} == {p.key for p in BUILTIN_PRESETS}
    assert "num_predict must be a whole number from 1 to 2147483647 or null, not 2147483648" in loaded.problems[0]
    assert "think must be true, false" in loaded.problems[1]


def test_a_bad_presets_file_that_could_not_be_moved_is_copied_before_a_save(tmp_path: Path, monkeypatch) -> None:
    store = PresetStore(tmp_path)
    store.path.write_bytes(b"{broken")
    real_replace = os.replace

    def refuse_once(*_args: object) -> None:
        monkeypatch.setattr(os, "replace", real_replace)
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(os, "replace", refuse_once)
    loaded = store.load()
    assert loaded.problems == [f"{store.path} could not be read because it is not valid JSON (Expecting property "
                               "name enclosed in double quotes, line 1 column 2), and could not be moved aside "
                               "(Read-only file system); showing the built-in presets. Saving keeps a copy of it first."]
    [note] = store.save(loaded.presets)
    copy = _only(tmp_path, "presets.json.backup-*")
    assert copy.read_bytes() == b"{broken"
    assert note == f"{store.path} had not been read; saving replaced it, and what it held is kept at {copy}."


def test_saves_from_several_threads_never_take_the_store_s_own_file_for_a_stranger(tmp_path: Path) -> None:
    store = PresetStore(tmp_path)
    loaded = store.load()
    versions = [[*loaded.presets, Preset(f"user-{n}", f"P{n}", "hi")] for n in range(40)]
    with ThreadPoolExecutor(8) as pool:
        notes = list(pool.map(store.save, versions))
    assert notes == [[]] * 40 and sorted(p.name for p in tmp_path.iterdir()) == ["presets.json"]
    assert store.save(loaded.presets) == []


def test_duplicate_presets_and_an_empty_entry_all_survive_a_save(tmp_path: Path) -> None:
    """Found by the long fuzz run: a duplicate key, an override and an empty entry; nothing is lost."""
    from app.adapters.storage.preset_store import PresetStore
    from app.core.console.presets import read_user_data

    raw = b'{"":1,"presets":[{"key":"ai-trends-essay-zh"},{"key":"ai-trends-essay-zh","":null},{}]}'
    (tmp_path / "presets.json").write_bytes(raw)
    store = PresetStore(tmp_path)
    store.save(store.load().presets)
    after = read_user_data(json.loads((tmp_path / "presets.json").read_bytes()))
    assert sorted(map(json.dumps, after.unread)) == sorted(map(json.dumps, [{"key": "ai-trends-essay-zh"}, {}]))
    assert after.extras == {"ai-trends-essay-zh": {"": None}} and after.other == {"": 1}
