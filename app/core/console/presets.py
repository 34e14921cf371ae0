"""Test prompts the console offers: the seed articles' prompts built in, edited or added by the user.

A user's edits are kept as data beside the built-ins: `user_data` returns only what differs
from them (and the user's own prompts), `apply_user_data` lays it back over the built-ins. A
built-in can always be reset; an unreadable entry is reported and skipped, never fatal.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from app.core.console.presets_text import LONG_DOCUMENT_ZH

PRESETS_VERSION = 1
THINK_VALUES = (True, False, "low", "medium", "high")
_KEY_RE = re.compile(r"[^a-z0-9]+")


@dataclass(frozen=True)
class Preset:
    """One test prompt: the text, whether to think, an optional system prompt and output cap."""

    key: str
    title: str
    prompt: str
    think: bool | str = False
    system: str = ""
    num_predict: int | None = None  # None: the model's default (no cap)
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
    if preset.think not in THINK_VALUES or (isinstance(preset.think, int) and not isinstance(preset.think, bool)):
        problems.append(f"think must be true, false, \"low\", \"medium\" or \"high\", not {preset.think!r}")
    if preset.num_predict is not None and (isinstance(preset.num_predict, bool) or not isinstance(preset.num_predict, int)
                                           or preset.num_predict < 1):
        problems.append(f"num_predict must be a positive whole number or null, not {preset.num_predict!r}")
    return problems


def _preset_from(entry: Any) -> tuple[Preset | None, str]:
    if not isinstance(entry, dict):
        return None, f"an entry is {type(entry).__name__}, not an object"
    known = {f.name for f in fields(Preset)}
    key = entry.get("key")
    if not isinstance(key, str) or not key:
        return None, "an entry has no key"
    base = builtin(key)
    values: dict[str, Any] = base.to_json() if base is not None else {"key": key, "title": "", "prompt": ""}
    for name, value in entry.items():
        if name in known:
            values[name] = value
    text_fields = ("key", "title", "prompt", "system", "description")
    if any(not isinstance(values[name], str) for name in text_fields if name in values):
        return None, f"'{key}': a text field holds something other than text"
    preset = Preset(**{name: values[name] for name in known if name in values})
    problems = validate_preset(preset)
    if problems:
        return None, f"'{key}': " + "; ".join(problems)
    return preset, ""


def apply_user_data(data: Any) -> tuple[list[Preset], list[str]]:
    """The built-ins with the user's edits laid over them, then the user's own presets; plus
    a readable note for every entry that could not be used."""
    presets = {p.key: p for p in BUILTIN_PRESETS}
    if data is None:
        return list(presets.values()), []
    if not isinstance(data, dict) or not isinstance(data.get("presets", []), list):
        return list(presets.values()), ["The presets file is not in the expected shape; using the built-in presets."]
    problems = []
    version = data.get("version", PRESETS_VERSION)
    if isinstance(version, int) and version > PRESETS_VERSION:
        problems.append(f"The presets file was written by a newer version (format {version}); "
                        "reading what this version understands.")
    for entry in data.get("presets", []):
        preset, why = _preset_from(entry)
        if preset is None:
            problems.append(f"Skipped a saved preset: {why}.")
            continue
        presets[preset.key] = preset
    return list(presets.values()), problems


def user_data(presets: list[Preset]) -> dict[str, Any]:
    """What to save: edited built-ins and the user's own presets (unedited built-ins are left out,
    so later versions can improve them)."""
    kept = [p.to_json() for p in presets if builtin(p.key) is None or is_edited(p)]
    return {"version": PRESETS_VERSION, "presets": kept}


def edited(preset: Preset, **changes: Any) -> Preset:
    """A copy with fields changed."""
    return replace(preset, **changes)


__all__ = ["BUILTIN_PRESETS", "PRESETS_VERSION", "Preset", "apply_user_data", "builtin", "edited",
           "is_builtin", "is_edited", "new_key", "user_data", "validate_preset"]
