"""Test prompts the console offers: the seed articles' prompts built in, edited or added by the user.

A user's edits are kept as data beside the built-ins: `user_data` returns only what differs
from them (and the user's own prompts), `apply_user_data` lays it back over the built-ins. A
built-in can always be reset; an unreadable entry is reported and skipped, never fatal.

What this version cannot use is carried, not dropped: `read_user_data` keeps the entries it skips
(verbatim), the fields of readable entries it does not know and the file's other top-level keys,
and `user_data(presets, saved)` writes them back, so a file from a newer version or a hand edit
loses nothing when this version saves.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from app.core.console.presets_text import LONG_DOCUMENT_ZH

PRESETS_VERSION = 1
THINK_VALUES = (True, False, "low", "medium", "high")
MAX_NUM_PREDICT = 2**31 - 1  # tokens; the form's spin box takes a C int, and a larger one raises there
_KEY_RE = re.compile(r"[^a-z0-9]+")


@dataclass(frozen=True)
class Preset:
    """One test prompt: the text, whether to think, an optional system prompt and output cap."""

    key: str
    title: str
    prompt: str
    think: bool | str = False
    system: str = ""
    num_predict: int | None = None  # None: the console's default cap (output_length.DEFAULT_NUM_PREDICT)
    description: str = ""

    def to_json(self) -> dict[str, Any]:
        """Plain dict for the presets file."""
        return asdict(self)


BUILTIN_PRESETS: tuple[Preset, ...] = (
    Preset(
        key="ai-trends-essay-zh",
        title="300-character essay: AI trends (Chinese)",
        prompt="请用中文写一篇关于人工智能发展趋势的300字短文",
        think=False,
        description="The fixed prompt the seed article timed at each batch size: a short "
                    "content-generation request, best in non-thinking mode.",
    ),
    Preset(
        key="long-document-summary",
        title="Long-document summary",
        prompt="请阅读下面的文档，用中文列出 5 条要点摘要，每条不超过 40 字。\n\n" + LONG_DOCUMENT_ZH,
        think=False,
        description="A long input measures prompt processing (prompt tokens/s) and time to first "
                    "token. Paste a longer text with Load file… to fill a large context.",
    ),
    Preset(
        key="math-apples",
        title="Math: apples per day (thinking)",
        prompt="小明有10个苹果，每天吃两个，请问几天吃完？",
        think=True,
        description="The seed article's example of a question worth thinking about; compare it "
                    "with thinking off in A/B.",
    ),
    Preset(
        key="math-quadratic",
        title="Math: solve x² + 5x + 6 = 0 (thinking)",
        prompt="解这个方程：x² + 5x + 6 = 0，并验证你的答案。",
        think=True,
        description="A step-by-step problem from the second seed article; thinking helps.",
    ),
)


def builtin(key: str) -> Preset | None:
    """The shipped preset with this key, or None."""
    return next((p for p in BUILTIN_PRESETS if p.key == key), None)


def is_builtin(key: str) -> bool:
    """True when the key names a shipped preset (which can be reset, not deleted)."""
    return builtin(key) is not None


def is_edited(preset: Preset) -> bool:
    """True when a shipped preset differs from how it shipped."""
    original = builtin(preset.key)
    return original is not None and original != preset


def new_key(title: str, taken: set[str]) -> str:
    """A key for a user's preset from its title, unique among `taken`."""
    base = _KEY_RE.sub("-", title.lower()).strip("-")[:40] or "preset"
    base = f"user-{base}"
    key, n = base, 2
    while key in taken:
        key, n = f"{base}-{n}", n + 1
    return key


def validate_preset(preset: Preset) -> list[str]:
    """What is wrong with a preset, in words; empty when it is usable."""
    problems = []
    if not preset.title.strip():
        problems.append("it has no title")
    if not preset.prompt.strip():
        problems.append("its prompt is empty")
    # 1 and 1.0 equal True in Python; only true, false and the three level names are accepted.
    if not (isinstance(preset.think, bool) or (isinstance(preset.think, str) and preset.think in THINK_VALUES)):
        problems.append(f"think must be true, false, \"low\", \"medium\" or \"high\", not {_short(preset.think)}")
    if preset.num_predict is not None and (isinstance(preset.num_predict, bool) or not isinstance(preset.num_predict, int)
                                           or not 1 <= preset.num_predict <= MAX_NUM_PREDICT):
        problems.append(f"num_predict must be a whole number from 1 to {MAX_NUM_PREDICT} or null, "
                        f"not {_short(preset.num_predict)}")
    return problems


def _short(value: Any, limit: int = 40) -> str:
    """repr() cut to `limit` characters (a hand-edited file can hold values of any size)."""
    if isinstance(value, int) and abs(value) >= 10**limit:
        return f"a whole number of {len(str(abs(value)))} digits"
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


_KNOWN_FIELDS = frozenset(f.name for f in fields(Preset))


def _preset_from(entry: Any) -> tuple[Preset | None, str]:
    if not isinstance(entry, dict):
        return None, f"an entry is {_json_type(entry)}, not an object"
    key = entry.get("key")
    if not isinstance(key, str) or not key:
        return None, "an entry has no key"
    base = builtin(key)
    values: dict[str, Any] = base.to_json() if base is not None else {"key": key, "title": "", "prompt": ""}
    for name, value in entry.items():
        if name in _KNOWN_FIELDS:
            values[name] = value
    text_fields = ("key", "title", "prompt", "system", "description")
    if any(not isinstance(values[name], str) for name in text_fields if name in values):
        return None, f"{_short(key)}: a text field holds something other than text"
    preset = Preset(**{name: values[name] for name in _KNOWN_FIELDS if name in values})
    problems = validate_preset(preset)
    if problems:
        return None, f"{_short(key)}: " + "; ".join(problems)
    return preset, ""


def _json_type(value: Any) -> str:
    names = {list: "a list", str: "text", bool: "true or false", type(None): "null", int: "a number", float: "a number"}
    return names.get(type(value), type(value).__name__)


@dataclass(frozen=True)
class PresetLoad:
    """The presets to offer and what was wrong with the file (user-readable)."""

    presets: list[Preset]
    problems: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class SavedPresets:
    """What a presets document held: the presets to offer, notes on what could not be used, and
    everything this version does not understand, to write back unchanged."""

    presets: list[Preset]
    problems: list[str] = field(default_factory=list)
    unread: list[Any] = field(default_factory=list)  # entries skipped, verbatim
    extras: dict[str, dict[str, Any]] = field(default_factory=dict)  # unknown fields, by preset key
    other: dict[str, Any] = field(default_factory=dict)  # top-level keys besides version and presets
    version: int = PRESETS_VERSION

    @property
    def newer(self) -> bool:
        """True when a later version wrote the document."""
        return self.version > PRESETS_VERSION


def read_user_data(data: Any) -> SavedPresets:
    """The built-ins with the user's edits laid over them, then the user's own presets, with a
    note for every entry that could not be used; see the module's notes on what is carried."""
    presets = {p.key: p for p in BUILTIN_PRESETS}
    if data is None:
        return SavedPresets(list(presets.values()))
    if not isinstance(data, dict) or not isinstance(data.get("presets", []), list):
        return SavedPresets(list(presets.values()),
                            ["The presets file is not in the expected shape; using the built-in presets."])
    problems = []
    version = data.get("version", PRESETS_VERSION)
    if isinstance(version, float) and version.is_integer() and abs(version) < 2**53:
        version = int(version)
    if not isinstance(version, int) or isinstance(version, bool):
        version = PRESETS_VERSION
    if version > PRESETS_VERSION:
        problems.append(f"The presets file was written by a newer version (format {_short(version)}); "
                        "reading what this version understands.")
    unread: list[Any] = []
    extras: dict[str, dict[str, Any]] = {}
    read: dict[str, Any] = {}  # key -> the entry it was read from, to keep one a later duplicate replaces
    for entry in data.get("presets", []):
        preset, why = _preset_from(entry)
        if preset is None:
            problems.append(f"Skipped a saved preset: {why}.")
            unread.append(entry)
            continue
        if preset.key in read:
            problems.append(f"Skipped a saved preset: {_short(preset.key)} appears twice; the later one is used.")
            unread.append(read[preset.key])
        read[preset.key] = entry
        presets[preset.key] = preset
        unknown = {name: value for name, value in entry.items() if name not in _KNOWN_FIELDS}
        if unknown:
            extras[preset.key] = unknown
        else:
            extras.pop(preset.key, None)
    other = {name: value for name, value in data.items() if name not in ("version", "presets")}
    return SavedPresets(list(presets.values()), problems, unread, extras, other, version)


def apply_user_data(data: Any) -> tuple[list[Preset], list[str]]:
    """The built-ins with the user's edits laid over them, then the user's own presets; plus
    a readable note for every entry that could not be used."""
    saved = read_user_data(data)
    return saved.presets, saved.problems


def user_data(presets: list[Preset], saved: SavedPresets | None = None) -> dict[str, Any]:
    """What to save: edited built-ins and the user's own presets (unedited built-ins are left out,
    so later versions can improve them), plus what `saved` carried that this version cannot use."""
    if saved is None:
        return {"version": PRESETS_VERSION,
                "presets": [p.to_json() for p in presets if builtin(p.key) is None or is_edited(p)]}
    keep = _written_keys(presets, saved)
    kept = [{**p.to_json(), **saved.extras.get(p.key, {})} for p in presets if p.key in keep]
    # Skipped entries go first: on the next read the entry of the same key written after them wins.
    return {"version": PRESETS_VERSION, "presets": [*saved.unread, *kept], **saved.other}


def _written_keys(presets: list[Preset], saved: SavedPresets) -> set[str]:
    """Keys of the presets a save writes: edited built-ins, the user's own, and built-ins that must
    be written to keep their unknown fields, or to win over an earlier duplicate kept in the file."""
    shadowing = {preset.key for preset, _ in map(_preset_from, saved.unread) if preset is not None}
    return {p.key for p in presets
            if builtin(p.key) is None or is_edited(p) or p.key in saved.extras or p.key in shadowing}


def dropped_extras(presets: list[Preset], saved: SavedPresets) -> list[str]:
    """Keys of presets whose unknown fields saving would drop (the preset was deleted since it was read)."""
    written = _written_keys(presets, saved)
    return sorted(key for key in saved.extras if key not in written)


def edited(preset: Preset, **changes: Any) -> Preset:
    """A copy with fields changed."""
    return replace(preset, **changes)


__all__ = ["BUILTIN_PRESETS", "MAX_NUM_PREDICT", "PRESETS_VERSION", "Preset", "PresetLoad", "SavedPresets", "apply_user_data",
           "builtin", "dropped_extras", "edited", "is_builtin", "is_edited", "new_key", "read_user_data", "user_data",
           "validate_preset"]
