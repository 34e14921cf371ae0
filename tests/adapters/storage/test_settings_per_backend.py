"""Each server keeps its own extra settings in the one settings file: a format-1 file read for llama-server, and
switching servers and saving, lose none of the other server's; the file stays format 2, which every release of
it reads (the others' extra settings ride in a top-level key those releases carry through their saves)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from app.adapters.storage.settings_format import EXTRA_SETTINGS_KEY
from app.adapters.storage.settings_store import SettingsStore
from app.backends.llama_server.tuning import LLAMA_SERVER_TUNING
from app.backends.ollama.tuning import OLLAMA_TUNING
from app.core.server.settings import SETTINGS_VERSION

V1_FILE = Path(__file__).parents[2] / "data" / "storage" / "settings-v1.json"


def test_a_format_1_file_read_for_llama_server_keeps_ollamas_extra_environment(tmp_path: Path) -> None:
    shutil.copyfile(V1_FILE, tmp_path / "settings.json")
    old = json.loads(V1_FILE.read_text("utf-8"))["settings"]
    assert old["extra_env"]  # the format-1 release's file has extra environment lines

    first = SettingsStore(tmp_path, LLAMA_SERVER_TUNING).load()

    assert first.settings.backend == "llama_server" and first.settings.extra_settings == ""
    assert first.settings.options == ()  # Ollama's knobs are not llama-server's
    assert not [p for p in first.problems if "refused" in p]  # Ollama's lines are not judged as llama-server flags
    written = json.loads((tmp_path / "settings.json").read_text("utf-8"))
    assert written["version"] == SETTINGS_VERSION and written["backend"] == "ollama"
    assert written["settings"]["extra_settings"] == old["extra_env"]
    ollama = SettingsStore(tmp_path, OLLAMA_TUNING).load()
    assert ollama.problems == [] and ollama.settings.extra_settings == old["extra_env"]
    assert ollama.settings.option("models_dir") == old["models_dir"]


def test_switching_servers_and_saving_keeps_each_servers_extra_settings(tmp_path: Path) -> None:
    ollama_store, llama_store = SettingsStore(tmp_path, OLLAMA_TUNING), SettingsStore(tmp_path, LLAMA_SERVER_TUNING)
    ollama_store.save(ollama_store.load().settings.replace(extra_settings="OLLAMA_DEBUG=1", num_parallel=3))

    llama = llama_store.load()
    assert llama.problems == [] and llama.settings.extra_settings == "" and llama.settings.num_parallel == 3
    llama_store.save(llama.settings.replace(extra_settings="--no-warmup"))

    ollama = ollama_store.load()
    assert ollama.problems == [] and ollama.settings.extra_settings == "OLLAMA_DEBUG=1"
    ollama_store.save(ollama.settings.replace(extra_settings="OLLAMA_DEBUG=2"))
    assert llama_store.load().settings.extra_settings == "--no-warmup"
    assert ollama_store.load().settings.extra_settings == "OLLAMA_DEBUG=2"


def test_a_release_that_writes_only_the_settings_extra_is_believed_for_its_backend(tmp_path: Path) -> None:
    # A format-2 release before the per-server key carries it through its save unchanged, and writes its own
    # backend's extra settings into "settings": that text, not the carried copy, is that backend's.
    (tmp_path / "settings.json").write_text(json.dumps({
        "version": 2, "backend": "ollama", "settings": {"extra_settings": "OLLAMA_DEBUG=2"},
        "backends": {"ollama": {}}, "preferences": {},
        EXTRA_SETTINGS_KEY: {"ollama": "OLLAMA_DEBUG=1", "llama_server": "--no-warmup"}}), "utf-8")
    assert SettingsStore(tmp_path, OLLAMA_TUNING).load().settings.extra_settings == "OLLAMA_DEBUG=2"
    store = SettingsStore(tmp_path, LLAMA_SERVER_TUNING)
    store.save(store.load().settings)
    written = json.loads((tmp_path / "settings.json").read_text("utf-8"))
    assert written["backend"] == "llama_server" and written["settings"]["extra_settings"] == "--no-warmup"
    assert written[EXTRA_SETTINGS_KEY] == {"ollama": "OLLAMA_DEBUG=2", "llama_server": "--no-warmup"}


def test_reading_for_llama_server_without_a_model_file_saved_warns_nothing_and_copies_nothing(tmp_path: Path) -> None:
    store = SettingsStore(tmp_path, LLAMA_SERVER_TUNING)
    store.save(SettingsStore(tmp_path, OLLAMA_TUNING).load().settings)  # an Ollama user's file
    for _ in range(2):  # every start
        result = store.load()
        assert result.problems == [] and result.backup_path is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["settings.json"]
