"""The flags llama-server takes, read from its --help text: the extra-flag check refuses any other.

FLAG_GROUPS is the installed build's --help as recorded in tests/data/llama_server/help.txt (each
group: one option's spellings); tests/data/llama_server/record.py writes both again after an upgrade."""

from __future__ import annotations

import re
from collections.abc import Iterable

from app.backends.llama_server.known_flags import FLAG_GROUPS

_NAME_SEPARATOR = re.compile(r",\s*")


def flag_groups(help_text: str) -> list[tuple[str, ...]]:
    """Each option's spellings in llama-server's --help output, e.g. ('-np', '--parallel')."""
    groups: list[tuple[str, ...]] = []
    for line in help_text.splitlines():
        if not line.startswith("-") or line.startswith("-----"):
            continue  # descriptions are indented; section titles are dashed rules
        names: list[str] = []
        for part in _NAME_SEPARATOR.split(line):
            words = part.strip().split()
            if not words or not words[0].startswith("-"):
                break
            names.append(words[0])
            if len(words) > 1 and not words[1].startswith("-"):
                break  # "--threads N   number of …": the value's name, then the description
        if names:
            groups.append(tuple(names))
    return groups


def known_flags(groups: Iterable[tuple[str, ...]] = FLAG_GROUPS) -> frozenset[str]:
    """Every spelling of every flag."""
    return frozenset(name for group in groups for name in group)


def spellings(flag: str, groups: Iterable[tuple[str, ...]] = FLAG_GROUPS) -> tuple[str, ...]:
    """All spellings of the option `flag` names (just (flag,) when it is unknown)."""
    return next((group for group in groups if flag in group), (flag,))


__all__ = ["FLAG_GROUPS", "flag_groups", "known_flags", "spellings"]
