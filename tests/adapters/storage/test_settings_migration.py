"""Settings files older releases wrote, read by this one: converted, the original kept, nothing lost."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from app.adapters.storage.settings_store import SettingsStore
from app.backends.ollama.tuning import OLLAMA_TUNING, environment, ollama_settings
from app.core.server.settings import SETTINGS_VERSION, ServerSettings
from app.core.units import MIB

# Written by the release that used format 1 (its SettingsStore.save, byte for byte).
V1_FILE = Path(__file__).parents[2] / "data" / "storage" / "settings-v1.json"
V1_OPTIONS = ("max_loaded_models", "gpu_overhead_mib", "models_dir", "ollama_binary")


def _v1_copy(directory: Path) -> SettingsStore:
    store = SettingsStore(directory, OLLAMA_TUNING)
    shutil.copyfile(V1_FILE, store.path)
    return store


def test_a_file_the_format_1_release_wrote_is_converted_field_by_field(tmp_path: Path) -> None:
    store = _v1_copy(tmp_path)
    original = store.path.read_bytes()
    old = json.loads(original)
    assert old["version"] == 1 and old["saved_at"] == "2026-12-01T09:01:38+00:00"

    result = store.load()

    s = result.settings
    for name, value in old["settings"].items():
        if name in V1_OPTIONS:
            assert s.option(name) == value, name
        elif name == "extra_env":
            assert s.extra_settings == value
        else:
            assert getattr(s, name) == value, name
    assert s.backend == "ollama" and s.batch_size is None and s.micro_batch_size is None
    assert result.preferences == old["preferences"]
    # The server gets exactly what the format-1 release gave it.
    assert environment(s) == {
        "OLLAMA_HOST": "0.0.0.0:11500", "OLLAMA_NUM_PARALLEL": "4", "OLLAMA_CONTEXT_LENGTH": "16384",
        "OLLAMA_KV_CACHE_TYPE": "q8_0", "OLLAMA_FLASH_ATTENTION": "1", "OLLAMA_KEEP_ALIVE": "-1",
        "OLLAMA_MAX_LOADED_MODELS": "2", "OLLAMA_MAX_QUEUE": "64", "OLLAMA_GPU_OVERHEAD": str(512 * MIB),
        "OLLAMA_MODELS": "/srv/modèles", "OLLAMA_DEBUG": "1", "CUDA_VISIBLE_DEVICES": "0",
    }

    assert result.backup_path == tmp_path / "settings.json.v1-backup"
    assert result.backup_path.read_bytes() == original
    text = " ".join(result.problems)
    assert "format version 1" in text and f"version {SETTINGS_VERSION}" in text
    assert "gpu_overhead_mib, max_loaded_models, models_dir, ollama_binary are now ollama's own" in text
    assert str(result.backup_path) in text

    written = json.loads(store.path.read_text("utf-8"))
    assert written["version"] == SETTINGS_VERSION and written["backend"] == "ollama"
    assert written["backends"] == {"ollama": {name: old["settings"][name] for name in V1_OPTIONS}}
    assert written["settings"]["extra_settings"] == old["settings"]["extra_env"]
    assert written["preferences"] == old["preferences"]

    again = store.load()
    assert again.settings == s and again.problems == [] and again.preferences == old["preferences"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["settings.json", "settings.json.v1-backup"]


def test_saving_over_a_format_1_file_unread_still_keeps_it(tmp_path: Path) -> None:
    store = _v1_copy(tmp_path)
    original = store.path.read_bytes()
    backup = store.save(ServerSettings(backend="ollama", num_parallel=2))
    assert backup == tmp_path / "settings.json.v1-backup" and backup.read_bytes() == original
    assert json.loads(store.path.read_text("utf-8"))["preferences"] == json.loads(original)["preferences"]


def test_a_format_1_value_ollama_refuses_is_reported_and_the_original_kept(tmp_path: Path) -> None:
    store = SettingsStore(tmp_path, OLLAMA_TUNING)
    old = json.loads(V1_FILE.read_text("utf-8"))
    old["settings"]["extra_env"] = "OLLAMA_MAX_BATCH_SIZE=8"
    old["settings"]["gpu_overhead_mib"] = -5
    store.path.write_text(json.dumps(old, indent=2), "utf-8")
    original = store.path.read_bytes()

    result = store.load()

    assert result.settings.extra_settings == "" and result.settings.option("gpu_overhead_mib") is None
    assert result.settings.option("models_dir") == "/srv/modèles"
    text = "\n".join(result.problems)
    assert "Extra environment (extra_settings): the saved value 'OLLAMA_MAX_BATCH_SIZE=8' was refused" in text
    assert "OLLAMA_NUM_PARALLEL" in text
    assert "GPU overhead (gpu_overhead_mib): the saved value -5 was refused" in text and "default 0" in text
    assert result.backup_path.read_bytes() == original


def test_saving_one_servers_settings_keeps_the_other_servers_options(tmp_path: Path) -> None:
    store = SettingsStore(tmp_path, OLLAMA_TUNING)
    store.path.write_text(json.dumps({
        "version": SETTINGS_VERSION, "backend": "ollama", "settings": {"num_parallel": 2},
        "backends": {"ollama": {"models_dir": "/srv/models"}, "llama_server": {"binary": "/opt/llama-server"}},
        "preferences": {},
    }), "utf-8")
    loaded = store.load()
    assert loaded.problems == []
    assert loaded.settings == ollama_settings(ServerSettings(num_parallel=2), models_dir="/srv/models")

    assert store.save(loaded.settings.replace(num_parallel=3).with_options(models_dir=None)) is None

    written = json.loads(store.path.read_text("utf-8"))
    assert written["backends"] == {"ollama": {}, "llama_server": {"binary": "/opt/llama-server"}}
    assert written["settings"]["num_parallel"] == 3


def test_a_malformed_backends_entry_is_reported_and_kept_aside(tmp_path: Path) -> None:
    store = SettingsStore(tmp_path, OLLAMA_TUNING)
    store.path.write_text(json.dumps({"version": SETTINGS_VERSION, "settings": {"num_parallel": 2},
                                      "backends": ["ollama"], "backend": 7}), "utf-8")
    result = store.load()
    assert result.settings == ServerSettings(backend="ollama", num_parallel=2)
    text = "\n".join(result.problems)
    assert "The saved server 7 is not a name; using ollama." in text
    assert "The saved server options were not an object" in text
    assert result.backup_path == tmp_path / "settings.json.invalid-backup"


def test_a_format_2_file_that_lost_its_version_is_not_taken_for_format_1(tmp_path: Path) -> None:
    store = SettingsStore(tmp_path, OLLAMA_TUNING)
    store.path.write_text(json.dumps({"backend": "ollama", "settings": {"num_parallel": 5},
                                      "backends": {"ollama": {"max_loaded_models": 1}}}), "utf-8")
    result = store.load()
    assert result.problems == [] and result.backup_path is None
    assert result.settings == ollama_settings(ServerSettings(num_parallel=5), max_loaded_models=1)
