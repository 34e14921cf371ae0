"""What must hold for any content of settings.json, presets.json and window.json, as plain functions
of the file's bytes (for the fuzz tests, and for longer runs with more examples), and hypothesis
strategies that produce such bytes: arbitrary bytes, arbitrary JSON, and valid files with one part
made hostile (a byte-order mark, deep nesting, a huge integer, a lone surrogate, a wrong type).

Each check writes the bytes into a fresh folder, loads through the real store, saves what it
loaded through the real store, and loads again. Nothing may raise; what the second load finds
must equal what the first offered; and nothing is lost silently: either the original's content is
still in the new file, or a copy with the original bytes lies beside it and a message names it.
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from app.adapters.storage import preset_store as preset_module
from app.adapters.storage import settings_format as fmt
from app.adapters.storage import ui_state as ui_module
from app.adapters.storage.json_file import decode_json
from app.adapters.storage.preset_store import PresetStore
from app.adapters.storage.settings_store import SettingsStore
from app.adapters.storage.ui_state import UiStateStore
from app.backends.ollama.tuning import OLLAMA_TUNING
from app.core.console.presets import BUILTIN_PRESETS, read_user_data
from app.core.server.settings import SETTINGS_VERSION


def canonical(value: Any) -> str:
    """One text for equal JSON values (NaN equals NaN here, unlike in Python)."""
    return json.dumps(value, sort_keys=True)


@contextmanager
def fresh_folder(tmp_dir: Path) -> Iterator[Path]:
    """An empty folder under tmp_dir, removed afterwards (a long run makes thousands)."""
    folder = Path(tempfile.mkdtemp(dir=tmp_dir))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def copies_of(folder: Path, name: str, raw: bytes) -> list[Path]:
    """Files beside `name` that hold exactly raw."""
    return [p for p in folder.iterdir() if p.name != name and p.is_file() and p.read_bytes() == raw]


def check_settings_bytes(tmp_dir: Path, raw: bytes) -> None:
    """settings.json holding raw: load, save, load never raise; nothing is lost silently."""
    with fresh_folder(tmp_dir) as folder:
        (folder / "settings.json").write_bytes(raw)
        store = SettingsStore(folder, OLLAMA_TUNING)
        first = store.load()
        saved_copy = store.save(first.settings, first.preferences)
        again = SettingsStore(folder, OLLAMA_TUNING).load()
        written = (folder / "settings.json").read_bytes()

        assert again.problems == [], "a file this version wrote must read back cleanly"
        assert again.settings == first.settings
        assert canonical(again.preferences) == canonical(first.preferences)
        assert decode_json(written)[1] == ""
        copies = copies_of(folder, "settings.json", raw)
        told = " ".join(first.problems)
        for copy in copies:
            assert str(copy) in told or copy == saved_copy, f"{copy.name} is kept but no message names it"
        if first.problems:
            assert copies, f"problems were reported but the original bytes are not kept: {first.problems}"
            return
        # Read without a problem and without a copy: everything the file held must still be there.
        original, why = decode_json(raw)
        assert why == "" and isinstance(original, dict)
        assert fmt.version_of(original) == SETTINGS_VERSION, "an older or newer file was read without a word"
        new = json.loads(written)
        for name, value in original.items():
            if name not in ("version", "saved_at", "settings", "backend", "backends"):
                assert canonical(new[name]) == canonical(value), f"top-level '{name}' was not kept"
        backends = original.get("backends", {})
        for name, options in (backends if isinstance(backends, dict) else {}).items():
            if name != first.settings.backend:
                assert canonical(new["backends"][name]) == canonical(options), f"backend '{name}' was not kept"


def check_presets_bytes(tmp_dir: Path, raw: bytes) -> None:
    """presets.json holding raw: load, save, load never raise; skipped entries, unknown fields and
    keys survive the save, or the original bytes are kept beside it and a message names the copy."""
    with fresh_folder(tmp_dir) as folder:
        path = folder / preset_module.PRESETS_FILE_NAME
        path.write_bytes(raw)
        store = PresetStore(folder)
        first = store.load()
        notes = store.save(first.presets)
        again = PresetStore(folder).load()

        assert again.presets == first.presets, "saving changed the presets offered"
        assert store.notices == [*first.problems, *notes]
        told = " ".join([*first.problems, *notes])
        copies = copies_of(folder, path.name, raw)
        for copy in copies:
            assert str(copy) in told, f"{copy.name} is kept but no message names it"
        original, why = decode_json(raw)
        if why or preset_module.shape_problem(original):
            assert copies, "an unreadable presets file was replaced without a copy"
            assert str(path) in told
            return
        before = read_user_data(original)
        after = read_user_data(json.loads(path.read_bytes()))
        # Kept, in any order: a duplicate is found skipped only when its later twin is read.
        assert sorted(map(canonical, after.unread)) == sorted(map(canonical, before.unread)), \
            "a skipped entry was not kept"
        assert canonical(after.extras) == canonical(before.extras), "unknown fields of a preset were not kept"
        assert canonical(after.other) == canonical(before.other), "unknown top-level keys were not kept"
        if before.unread:
            assert str(path) in told
        if before.newer:
            assert copies, "a newer version's file was rewritten without a copy"


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def check_window_bytes(tmp_dir: Path, raw: bytes) -> None:
    """window.json holding raw: load, save, load never raise and agree; an unusable file is moved
    aside with its bytes and the log names where (its other content has no use: see ui_state)."""
    records = _Records()
    ui_module.log.addHandler(records)
    try:
        with fresh_folder(tmp_dir) as folder:
            (folder / "window.json").write_bytes(raw)
            first = UiStateStore(folder).load()
            assert UiStateStore(folder).save(first)
            assert UiStateStore(folder).load() == first
            original, why = decode_json(raw)
            if why or not isinstance(original, dict):
                [copy] = copies_of(folder, "window.json", raw)
                assert any(copy.name in line for line in records.lines)
    finally:
        ui_module.log.removeHandler(records)


# ---- strategies ------------------------------------------------------------------------------

HOSTILE = "\u0000@hostile@"  # stands for the hostile bytes in a document until it is encoded

json_scalars = (st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
                | st.sampled_from([0, 1, -1, 2**63, 10**30, 1.0, 2.0, 1.5, "", "q8_0", "on", "5m", "127.0.0.1"]))
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)

hostile_parts = st.sampled_from([
    b"[" * 300 + b"]" * 300,  # deeper than the reader allows, balanced
    b"[" * 100_000,  # deep and unterminated
    b'{"a":' * 20_000 + b"1" + b"}" * 20_000,
    b"9" * 5000,  # longer than int() converts
    b"-" + b"1" * 4301,
    b'"\\ud800"', b'"x\\udfff"', b'"\\ud83d\\ude00"',  # lone surrogates, and a valid pair
    b"NaN", b"-Infinity", b"1e400",
    b'"\xff"',  # not UTF-8
])


def encode(document: Any, ascii_only: bool) -> bytes:
    """The document as JSON bytes, with HOSTILE replaced by nothing (see `with_hostile`)."""
    return json.dumps(document, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")


@st.composite
def mutated(draw: st.DrawFn, documents: st.SearchStrategy[Any]) -> bytes:
    """A document's bytes with one value made hostile, a BOM in front, or cut short."""
    document = draw(documents)
    raw = encode(document, draw(st.booleans()))
    if isinstance(document, dict) and document and draw(st.booleans()):
        paths = list(_paths(document))
        target = draw(st.sampled_from(paths))
        changed = json.loads(raw)
        _set(changed, target, HOSTILE)
        marker = json.dumps(HOSTILE).encode("utf-8")
        raw = encode(changed, True).replace(marker, draw(hostile_parts), 1)
    if draw(st.integers(0, 4)) == 0:
        raw = b"\xef\xbb\xbf" + raw
    if draw(st.integers(0, 9)) == 0:
        raw = raw[: draw(st.integers(0, len(raw)))]
    return raw


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if prefix:
        yield prefix
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from _paths(inner, (*prefix, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            yield from _paths(inner, (*prefix, index))


def _set(document: Any, path: tuple[Any, ...], value: Any) -> None:
    for step in path[:-1]:
        document = document[step]
    document[path[-1]] = value


FIELD_NAMES = ["num_parallel", "context_length", "kv_cache_type", "flash_attention", "batch_size",
               "micro_batch_size", "keep_alive", "max_queue", "host", "port", "allow_network", "extra_settings",
               "backend", "options", "extra_env", "max_loaded_models", "gpu_overhead_mib", "models_dir",
               "unknown_knob"]
FIELD_VALUES = st.sampled_from([1, 4, 64, 65, 0, -1, 256, 4096, 11434, 70000, None, True, False, "f16", "q8_0",
                                "on", "off", "auto", "5m", "-1", "0", "127.0.0.1", "0.0.0.0", "localhost", "",
                                "OLLAMA_DEBUG=1", "/srv/models", "~/models"]) | json_values

any_settings_documents = st.fixed_dictionaries({}, optional={
    "version": st.sampled_from([0, 1, 2, 3, 1.0, 2.0, 1.5, "2", True, -1, None, 10**6]) | json_values,
    "saved_at": st.just("2026-08-01T12:00:00+00:00"),
    "backend": st.sampled_from(["ollama", "llama_server", ""]) | json_values,
    "settings": st.dictionaries(st.sampled_from(FIELD_NAMES), FIELD_VALUES, max_size=8) | json_values,
    "backends": st.dictionaries(st.sampled_from(["ollama", "llama_server", "other"]),
                                st.dictionaries(st.sampled_from(FIELD_NAMES), FIELD_VALUES, max_size=3) | json_values,
                                max_size=3) | json_values,
    "preferences": st.dictionaries(st.text(max_size=8), json_values, max_size=3) | json_values,
    "future_key": json_values,
}) | st.dictionaries(st.sampled_from(FIELD_NAMES + ["parallel", "num_ctx", "kv_cache", "flash_attn"]),
                     FIELD_VALUES, max_size=6)  # format 0: flat

# Files a user of this version has: valid values, so that reading them finds no problem and what a
# save must carry (other servers' entries, keys a later version added) is what the check looks at.
clean_settings_documents = st.fixed_dictionaries({
    "version": st.sampled_from([SETTINGS_VERSION, float(SETTINGS_VERSION)]),
    "backend": st.just("ollama"),
    "settings": st.fixed_dictionaries({}, optional={
        "num_parallel": st.integers(1, 8), "context_length": st.sampled_from([None, 4096, 8192]),
        "flash_attention": st.sampled_from(["auto", "on", "off"]), "keep_alive": st.sampled_from(["5m", "-1"]),
        "max_queue": st.integers(1, 1000), "port": st.integers(1024, 65535)}),
}, optional={
    "saved_at": st.just("2026-08-01T12:00:00+00:00"),
    "backends": st.fixed_dictionaries({}, optional={
        "ollama": st.fixed_dictionaries({}, optional={"max_loaded_models": st.integers(0, 4),
                                                      "models_dir": st.just("/srv/models")}),
        "llama_server": json_values, "other": json_values}),
    "preferences": st.dictionaries(st.text(max_size=8), json_values, max_size=3),
    "future_key": json_values, "another": json_values,
})

PRESET_KEYS = [p.key for p in BUILTIN_PRESETS[:2]] + ["user-a", "user-b", ""]
preset_entries = st.fixed_dictionaries({}, optional={
    "key": st.sampled_from(PRESET_KEYS) | json_values,
    "title": st.sampled_from(["A title", "", "  "]) | json_values,
    "prompt": st.sampled_from(["Say hello", ""]) | json_values,
    "think": st.sampled_from([True, False, "low", "high", "maximum", 1, 1.0, 0]) | json_values,
    "system": st.sampled_from(["", "Be brief."]) | json_values,
    "num_predict": st.sampled_from([None, 1, 512, 0, -3, 2**31, 10**30, 1.0]) | json_values,
    "description": st.just("Mine"),
    "tags": json_values,  # a field a later version might add
}) | json_values
presets_documents = st.fixed_dictionaries({}, optional={
    "version": st.sampled_from([1, 2, 1.0, 0, 99, "1", True, -1, 1.5]) | json_values,
    "presets": st.lists(preset_entries, max_size=5) | json_values,
    "folders": json_values,
}) | json_values

window_documents = st.fixed_dictionaries({}, optional={
    "version": st.sampled_from([1, 2]) | json_values,
    "page": st.sampled_from(["server", "bench", "", "x" * 100]) | json_values,
    "geometry": st.sampled_from(["AdnQywADAAA=", "not base64!", "A" * 20_000, ""]) | json_values,
    "markdown": st.booleans() | json_values,
}) | json_values


settings_documents = clean_settings_documents | any_settings_documents


def file_bytes(documents: st.SearchStrategy[Any]) -> st.SearchStrategy[bytes]:
    """Arbitrary bytes, arbitrary JSON, and documents of the file's shape, plain or mutated."""
    return (st.binary(max_size=300) | st.builds(encode, json_values, st.booleans())
            | st.builds(encode, documents, st.booleans()) | mutated(documents))


__all__ = ["canonical", "check_presets_bytes", "check_settings_bytes", "check_window_bytes", "file_bytes",
           "presets_documents", "settings_documents", "window_documents"]
