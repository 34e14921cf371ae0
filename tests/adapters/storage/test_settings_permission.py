"""The settings file's network permission: an old yes/no is read as a permission for the host saved beside it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.adapters.storage.settings_store import SettingsStore
from app.backends.ollama.tuning import OLLAMA_TUNING
from app.core.server.settings import SETTINGS_VERSION, ServerSettings


def _write(store: SettingsStore, document: dict) -> None:
    store.config_dir.mkdir(parents=True, exist_ok=True)
    store.path.write_text(json.dumps(document), "utf-8")


@pytest.mark.parametrize("version", [1, 2])
def test_an_old_file_allowing_the_network_on_0000_keeps_that_host_allowed(tmp_path: Path, version: int) -> None:
    store = SettingsStore(tmp_path, OLLAMA_TUNING)
    body = {"host": "0.0.0.0", "port": 11500, "allow_network": True, "num_parallel": 2}
    _write(store, {"version": version, "settings": body, **({"backend": "ollama"} if version == 2 else {})})
    result = store.load()
    assert result.settings.host == "0.0.0.0" and result.settings.network_allowed_for == "0.0.0.0"
    assert result.settings.num_parallel == 2
    assert not any("refused" in p or "allow_network" in p for p in result.problems), result.problems
    store.save(result.settings)
    saved = json.loads(store.path.read_text("utf-8"))
    assert saved["version"] == SETTINGS_VERSION
    assert saved["settings"]["network_allowed_for"] == "0.0.0.0" and "allow_network" not in saved["settings"]
    assert store.load().settings == result.settings


def test_an_old_permission_on_loopback_is_dropped_and_another_host_is_not_allowed(tmp_path: Path) -> None:
    store = SettingsStore(tmp_path, OLLAMA_TUNING)
    _write(store, {"version": 2, "backend": "ollama", "settings": {"host": "127.0.0.1", "allow_network": True}})
    loaded = store.load()
    assert loaded.settings == ServerSettings(backend="ollama") and loaded.problems == []
    # A file allowing 0.0.0.0 but binding 192.168.1.5 does not open 192.168.1.5: the host falls back to loopback.
    _write(store, {"version": 2, "backend": "ollama",
                   "settings": {"host": "192.168.1.5", "network_allowed_for": "0.0.0.0"}})
    refused = store.load()
    assert refused.settings.host == "127.0.0.1" and refused.settings.network_allowed_for == ""
    assert any("192.168.1.5" in p and "Allow network access on 192.168.1.5" in p for p in refused.problems)


def test_a_wildcard_origin_without_permission_keeps_the_extra_environment(tmp_path: Path) -> None:
    # The refusal names the permission, so loading does not throw away the user's other extra lines.
    store = SettingsStore(tmp_path, OLLAMA_TUNING)
    extra = "CUDA_VISIBLE_DEVICES=0\nOLLAMA_ORIGINS=*"
    _write(store, {"version": 2, "backend": "ollama", "settings": {"extra_settings": extra}})
    loaded = store.load()
    assert loaded.settings.extra_settings == extra and not loaded.settings.allow_network
    assert not OLLAMA_TUNING.validate(loaded.settings).ok
    assert any("OLLAMA_ORIGINS=*" in p for p in loaded.problems)
