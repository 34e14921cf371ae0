"""A scenario as the TOML a person edits, and the line of that text a parser's message is about."""

from __future__ import annotations

import json
import re
from typing import Any

from app.core.bench.scenario import Scenario

_AT_LINE = re.compile(r"\(at line (\d+), column \d+\)|: line (\d+) column \d+")
_IN_CLASS = re.compile(r"classes\[(\d+)\](?:\.(\w+))?(?:\.(\w+))?")
_TOP_FIELD = re.compile(r": (\w+) (?:=|is) ")
_UNKNOWN = re.compile(r"unknown field '(\w+)'")


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a TOML basic string: JSON's escapes are TOML's
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"no TOML form for {type(value).__name__}")


def scenario_toml(scenario: Scenario) -> str:
    """The scenario as a TOML file that parse_scenario reads back to the same scenario."""
    data = scenario.to_json()
    out = [f"name = {_value(data['name'])}"]
    if "description" in data:
        out.append(f"description = {_value(data['description'])}")
    if "scaled_by" in data:
        out.append(f"scaled_by = {_value(data['scaled_by'])}")
    for cls in data["classes"]:
        out += ["", "[[classes]]"]
        out += [f"{key} = {_value(value)}" for key, value in cls.items() if not isinstance(value, dict)]
        for key, value in cls.items():  # tables last, one line per figure: short lines read well in a narrow box
            if isinstance(value, dict):
                out += [f"[classes.{key}]", *(f"{k} = {_value(v)}" for k, v in value.items())]
    return "\n".join(out) + "\n"


def _find_key(lines: list[str], start: int, end: int, key: str, sub_table: bool) -> int | None:
    """The 0-based line in [start, end) that sets `key` (`key = …`, or a `[classes.key]` header when
    `sub_table`); None when none does."""
    setting = re.compile(rf"\s*{re.escape(key)}\s*[=.]")
    header = re.compile(rf"\s*\[\s*classes\.{re.escape(key)}\s*\]")
    for n in range(start, end):
        if setting.match(lines[n]) or (sub_table and header.match(lines[n])):
            return n
        if not sub_table and lines[n].lstrip().startswith("["):
            return None  # the next table: the key is not in this one
    return None


def problem_line(text: str, message: str) -> int | None:
    """The 1-based line of `text` that a parser's `message` is about: the line a syntax error names, or the
    line of the field (or the class) a scenario error names; None when it names no place in the text."""
    at = _AT_LINE.search(message)
    if at:
        return int(at.group(1) or at.group(2))
    lines = text.splitlines()
    if "(at end of document)" in message:
        return max(1, len(lines))
    where = _IN_CLASS.search(message)
    if where:
        tables = [n for n, line in enumerate(lines) if line.strip().startswith("[[classes]]")]
        number = int(where.group(1))
        if number >= len(tables):
            return None
        start = tables[number]
        end = tables[number + 1] if number + 1 < len(tables) else len(lines)
        unknown = _UNKNOWN.search(message)
        path = [k for k in (where.group(2), where.group(3)) if k]
        if unknown:
            path.append(unknown.group(1))
        line = start
        for depth, key in enumerate(path):
            found = _find_key(lines, line + 1, end, key, sub_table=depth == 0)
            if found is None:
                break
            line = found
        return line + 1
    top = _UNKNOWN.search(message) or _TOP_FIELD.search(message)
    if top:
        first_table = next((n for n, line in enumerate(lines) if line.strip().startswith("[")), len(lines))
        for n in range(first_table):
            if re.match(rf"\s*{re.escape(top.group(1))}\s*=", lines[n]):
                return n + 1
    return None


__all__ = ["problem_line", "scenario_toml"]
