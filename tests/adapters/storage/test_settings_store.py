"""The settings file on a real file system: round trips, atomic saves, damaged and foreign files."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from app.adapters.storage.settings_store import SettingsSaveError, SettingsStore
from app.backends.llama_server.tuning import LLAMA_SERVER_TUNING
from app.backends.ollama.tuning import OLLAMA_TUNING, ollama_settings
from app.core.errors import DeckError
from app.core.server.settings import SETTINGS_VERSION, ServerSettings

TUNED = ollama_settings(
    ServerSettings(
        num_parallel=4,
        context_length=16384,
        kv_cache_type="q8_0",
        flash_attention="on",
        keep_alive="-1",
        max_queue=64,
        host="0.0.0.0",
        port=11500,
        extra_settings="OLLAMA_DEBUG=1\nCUDA_VISIBLE_DEVICES=0",
        network_allowed_for="0.0.0.0",
    ),
    max_loaded_models=2,
    gpu_overhead_mib=512,
    models_dir="/srv/models",
    ollama_binary="/opt/ollama/bin/ollama",
)


def _temp_files(directory: Path) -> list[Path]:
    return sorted(directory.glob(".settings.json.*.tmp"))


def test_missing_file_gives_defaults_without_problems(tmp_path: Path) -> None:
    result = SettingsStore(tmp_path / "not-yet").load()
    assert result.settings == ServerSettings(backend="ollama")
    assert result.problems == [] and result.backup_path is None and result.preferences == {}


def test_a_first_start_gives_the_defaults_of_the_stores_server_and_saves_them_as_its_own(tmp_path: Path) -> None:
    store = SettingsStore(tmp_path, LLAMA_SERVER_TUNING)
    first = store.load()
    assert first.settings == ServerSettings(backend="llama_server") and first.problems == []
    applied = first.settings.with_options(threads=4)
    store.save(applied)
    saved = json.loads(store.path.read_text("utf-8"))
    assert saved["backend"] == "llama_server" and saved["backends"] == {"llama_server": {"threads": 4}}
    assert SettingsStore(tmp_path, LLAMA_SERVER_TUNING).load().settings == applied  # its options read back


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="XDG directories are Linux's")
def test_default_directory_follows_the_platform_config_dir(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert SettingsStore().path == tmp_path / "ollama-deck" / "settings.json"


def test_round_trip_keeps_every_field_and_preferences(tmp_path: Path) -> None:
    store = SettingsStore(tmp_path / "cfg", OLLAMA_TUNING)  # created on first save
    assert store.save(TUNED, {"last_page": "sweep", "window": [10, 20, 1280, 800]}) is None
    result = store.load()
    assert result.settings == TUNED
    assert result.problems == []
    assert result.preferences == {"last_page": "sweep", "window": [10, 20, 1280, 800]}
    document = json.loads(store.path.read_text("utf-8"))
    assert document["version"] == SETTINGS_VERSION
    assert document["saved_at"].endswith("+00:00")
    assert document["settings"]["kv_cache_type"] == "q8_0"


def test_saving_settings_alone_keeps_saved_preferences(tmp_path: Path) -> None:
    store = SettingsStore(tmp_path)
    store.save(ServerSettings(backend="ollama"), {"last_page": "models"})
    store.save(TUNED)
    assert store.load().preferences == {"last_page": "models"}


@pytest.mark.parametrize("failing", ["replace", "fsync"])
def test_a_failed_write_leaves_the_old_file_and_no_temp_files(
    tmp_path: Path, monkeypatch, failing: str
) -> None:
    store = SettingsStore(tmp_path)
    store.save(TUNED)
    before = store.path.read_bytes()

    def disk_full(*_args, **_kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, failing, disk_full)
    with pytest.raises(DeckError) as caught:
        store.save(ServerSettings(backend="ollama", num_parallel=9))
    monkeypatch.undo()

    assert isinstance(caught.value, SettingsSaveError)
    assert str(store.path) in caught.value.message
    assert "No space left on device" in caught.value.message
    assert "free some space" in caught.value.hint
    assert store.path.read_bytes() == before
    assert _temp_files(tmp_path) == []
    assert store.load().settings == TUNED


def test_corrupt_file_is_moved_aside_and_reported(tmp_path: Path) -> None:
    store = SettingsStore(tmp_path)
    store.path.write_text('{"version": 1, "settings": {"num_parallel": 4', "utf-8")
    result = store.load()
    assert result.settings == ServerSettings(backend="ollama")
    assert result.backup_path is not None and result.backup_path.name.startswith("settings.json.corrupt-")
    assert result.backup_path.read_text("utf-8").startswith('{"version": 1')
    assert not store.path.exists()
    [problem] = result.problems
    assert "not valid JSON" in problem and str(result.backup_path) in problem
    # Saving afterwards never touches the copy.
    store.save(TUNED)
    assert result.backup_path.exists()


@pytest.mark.parametrize("content, reason", [
    ("[1, 2, 3]", "JSON list, not an object"),
    ('"just text"', "JSON str, not an object"),
    ('{"version": "one", "settings": {}}', "version 'one' is not a whole number"),
    ('{"version": 1, "settings": [4]}', '"settings" entry is not an object'),
    (b"\xff\xfe\x00garbage", "not UTF-8"),
])
def test_files_of_the_wrong_shape_are_kept_aside(tmp_path: Path, content, reason: str) -> None:
    store = SettingsStore(tmp_path)
    raw = content if isinstance(content, bytes) else content.encode("utf-8")
    store.path.write_bytes(raw)
    result = store.load()
    assert result.settings == ServerSettings(backend="ollama")
    assert reason in result.problems[0]
    assert result.backup_path is not None and result.backup_path.read_bytes() == raw


def test_two_corrupt_files_in_one_second_get_distinct_copies(tmp_path: Path) -> None:
    store = SettingsStore(tmp_path)
    store.path.write_text("first{", "utf-8")
    first = store.load().backup_path
    store.path.write_text("second{", "utf-8")
    second = store.load().backup_path
    assert first != second
    assert first.read_text("utf-8") == "first{" and second.read_text("utf-8") == "second{"


def test_version_0_is_migrated_reported_and_kept(tmp_path: Path) -> None:
    store = SettingsStore(tmp_path)
    old = {"parallel": 3, "num_ctx": 0, "kv_cache": "q8_0", "flash_attn": True, "keep_alive": "10m",
           "models_path": "/data/models"}
    store.path.write_text(json.dumps(old), "utf-8")
    original = store.path.read_bytes()

    result = store.load()

    assert result.settings == ollama_settings(ServerSettings(
        num_parallel=3, context_length=None, kv_cache_type="q8_0", flash_attention="on",
        keep_alive="10m"), models_dir="/data/models",
    )
    assert result.backup_path == tmp_path / "settings.json.v0-backup"
    assert result.backup_path.read_bytes() == original
    text = " ".join(result.problems)
    assert "version 0" in text and "'parallel' to 'num_parallel'" in text
    assert str(result.backup_path) in text
    assert json.loads(store.path.read_text("utf-8"))["version"] == SETTINGS_VERSION
    again = store.load()
    assert again.settings == result.settings and again.problems == []


def test_newer_version_is_read_reported_and_not_clobbered(tmp_path: Path) -> None:
    store = SettingsStore(tmp_path)
    newer = {"version": SETTINGS_VERSION + 1, "saved_at": "2030-01-01T00:00:00+00:00",
             "settings": {"num_parallel": 6, "speculative_draft": "qwen3:0.6b"},
             "preferences": {"theme": "dark"}}
    store.path.write_text(json.dumps(newer), "utf-8")
    original = store.path.read_bytes()

    result = store.load()

    assert result.settings == ServerSettings(backend="ollama", num_parallel=6)
    assert result.preferences == {"theme": "dark"}
    [problem] = result.problems
    assert f"format version {SETTINGS_VERSION + 1}" in problem
    assert "speculative_draft" in problem and str(result.backup_path) in problem
    assert store.path.read_bytes() == original  # loading alone writes nothing over it
    assert result.backup_path.read_bytes() == original

    assert store.save(result.settings) == result.backup_path
    assert result.backup_path.read_bytes() == original
    assert json.loads(store.path.read_text("utf-8"))["version"] == SETTINGS_VERSION


def test_save_without_load_still_keeps_a_newer_file(tmp_path: Path) -> None:
    store = SettingsStore(tmp_path)
    store.path.write_text(json.dumps({"version": 99, "settings": {}}), "utf-8")
    backup = store.save(TUNED)
    assert backup == tmp_path / "settings.json.v99-backup"
    assert json.loads(backup.read_text("utf-8"))["version"] == 99


def test_invalid_values_are_replaced_per_field_and_reported(tmp_path: Path) -> None:
    store = SettingsStore(tmp_path, OLLAMA_TUNING)
    body = {"num_parallel": 200, "port": "11434", "kv_cache_type": "q4_0", "flash_attention": "off",
            "extra_env": "OLLAMA_MAX_BATCH_SIZE=8", "keep_alive": "5m", "host": "0.0.0.0",
            "context_length": 8192, "bogus": 1}
    store.path.write_text(json.dumps({"version": SETTINGS_VERSION, "settings": body}), "utf-8")

    result = store.load()

    assert result.settings == ServerSettings(backend="ollama", context_length=8192, flash_attention="off")
    text = "\n".join(result.problems)
    for expected in ("Parallel requests (num_parallel): the saved value 200",
                     "Port (port): '11434' is not a whole number",
                     "KV-cache type (kv_cache_type)", "needs flash attention",
                     "OLLAMA_MAX_BATCH_SIZE does not exist", "OLLAMA_NUM_PARALLEL",
                     "Host (host)", "'bogus'"):
        assert expected in text
    assert result.backup_path == tmp_path / "settings.json.invalid-backup"
    assert str(result.backup_path) in text
    # Loading again reports again but keeps a single copy.
    assert store.load().backup_path == result.backup_path
    assert len(list(tmp_path.glob("settings.json.invalid-backup*"))) == 1


def test_stale_temp_files_are_removed_and_fresh_ones_left(tmp_path: Path) -> None:
    stale = tmp_path / ".settings.json.dead.tmp"
    fresh = tmp_path / ".settings.json.live.tmp"
    stale.write_text("{", "utf-8")
    fresh.write_text("{", "utf-8")
    os.utime(stale, (0, 0))
    SettingsStore(tmp_path).load()
    assert not stale.exists() and fresh.exists()


def _save_in_child_as_nobody(store: SettingsStore) -> str:
    """Run save() in a forked child that has dropped root, so permissions apply; return its outcome."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        outcome = "?"
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            assert store.load().settings == TUNED  # readable; only writing is refused
            store.save(ServerSettings(backend="ollama"))
            outcome = "saved"
        except DeckError as exc:
            outcome = f"{type(exc).__name__}|{exc.message}|{exc.hint}"
        except BaseException as exc:
            outcome = f"unexpected|{exc!r}"
        finally:
            os.write(write_end, outcome.encode("utf-8"))
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        outcome = pipe.read().decode("utf-8")
    os.waitpid(pid, 0)
    return outcome


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs POSIX permissions")
def test_read_only_directory_gives_a_clear_error(tmp_path: Path) -> None:
    # A directory every user can traverse, so an unprivileged child can reach it.
    base = Path(tempfile.mkdtemp(prefix="deck-ro-"))
    try:
        base.chmod(0o755)
        config = base / "cfg"
        store = SettingsStore(config)
        store.save(TUNED)
        store.path.chmod(0o644)
        config.chmod(0o555)
        before = store.path.read_bytes()
        if os.geteuid() == 0:
            outcome = _save_in_child_as_nobody(store)
        else:
            try:
                store.save(ServerSettings(backend="ollama"))
                outcome = "saved"
            except DeckError as exc:
                outcome = f"{type(exc).__name__}|{exc.message}|{exc.hint}"
        kind, message, hint = outcome.split("|")
        assert kind == "SettingsSaveError"
        assert str(store.path) in message and "Permission denied" in message
        assert str(config) in hint and "permissions" in hint
        assert store.path.read_bytes() == before
        assert _temp_files(config) == []
    finally:
        (base / "cfg").chmod(0o755)
        shutil.rmtree(base)


_WRITER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from app.adapters.storage.settings_store import SettingsStore
    from app.core.server.settings import ServerSettings

    store = SettingsStore(Path(sys.argv[1]))
    filler = "# " + "x" * 200_000  # a large file widens the window for a kill mid-write
    count = 0
    while True:
        count += 1
        store.save(ServerSettings(backend="ollama", num_parallel=1 + count % 64, extra_settings=filler), {"count": count})
        print(count, flush=True)
""")


@pytest.mark.slow
def test_killing_a_writer_mid_save_never_leaves_a_broken_file(tmp_path: Path) -> None:
    for _round in range(3):
        child = subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(tmp_path)],
            stdout=subprocess.PIPE, text=True,
        )
        try:
            for _ in range(5):  # each line means one complete save
                assert child.stdout.readline().strip(), "the writer exited early"
            child.send_signal(signal.SIGKILL)
        finally:
            child.kill()
            child.wait(timeout=30)
            child.stdout.close()
        result = SettingsStore(tmp_path).load()
        assert result.problems == []
        count = result.preferences["count"]
        assert count >= 5
        assert result.settings.num_parallel == 1 + count % 64  # settings and preferences of one save


def test_preferences_that_are_not_an_object_keep_the_file_as_it_was(tmp_path: Path) -> None:
    """The next save writes default preferences over them: the file's bytes are kept first, and said where."""
    store = SettingsStore(tmp_path, OLLAMA_TUNING)
    raw = json.dumps({"version": SETTINGS_VERSION, "settings": {}, "preferences": "dark"}).encode()
    store.path.write_bytes(raw)

    result = store.load()

    assert result.preferences == {} and result.problems[0].startswith("The saved preferences were not an object")
    assert result.backup_path == tmp_path / "settings.json.invalid-backup"
    assert result.backup_path.read_bytes() == raw and str(result.backup_path) in " ".join(result.problems)
