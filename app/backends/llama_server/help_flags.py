"""The flags llama-server takes, read from its --help text, and extra-flag lines parsed with them.

FLAG_GROUPS is the installed build's --help as recorded in tests/data/llama_server/help.txt (each
group: one option's spellings), VALUE_COUNTS how many values each option takes (the value names
--help prints after it: none for a switch, two for --control-vector-layer-range START END);
tests/data/llama_server/record.py writes both again after an upgrade.

parse_flags() reads extra-flag text the way llama-server reads its argv (common/arg.cpp): each word
where an option is due must be one of its spellings exactly (in a `--` word `_` reads as `-`),
and the option then takes its next VALUE_COUNTS words whatever they look like (`--alias --host`
names the model "--host"). llama-server has no `--flag=value`; the parser accepts it for an option
of one value and passes it on as two words."""

from __future__ import annotations

import enum
import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from app.backends.llama_server.known_flags import FLAG_GROUPS, VALUE_COUNTS

_NAME_SEPARATOR = re.compile(r",\s*")
_DESCRIPTION_GAP = re.compile(r"\s{2,}")
_BRACKETED = re.compile(r"<[^>]*>")  # a value name with spaces: <tensor name pattern>=<buffer type>


def flag_options(help_text: str) -> list[tuple[tuple[str, ...], int]]:
    """Each option in llama-server's --help output: its spellings and how many values it takes,
    e.g. (('-np', '--parallel'), 1)."""
    options: list[tuple[tuple[str, ...], int]] = []
    for line in help_text.splitlines():
        if not line.startswith("-") or line.startswith("-----"):
            continue  # descriptions are indented; section titles are dashed rules
        names: list[str] = []
        count = 0
        for part in _NAME_SEPARATOR.split(line):
            words = part.strip().split()
            if not words or not words[0].startswith("-"):
                break
            names.append(words[0])
            rest = part.strip()[len(words[0]):]
            if rest:  # "--threads N   number of …": the value's names, then (after a gap) the description
                if not _DESCRIPTION_GAP.match(rest):
                    value_names = _DESCRIPTION_GAP.split(rest.strip())[0]
                    count = len(_BRACKETED.sub("V", value_names).split())
                break
        if names:
            options.append((tuple(names), count))
    return options


def flag_groups(help_text: str) -> list[tuple[str, ...]]:
    """Each option's spellings in llama-server's --help output, e.g. ('-np', '--parallel')."""
    return [names for names, _count in flag_options(help_text)]


def known_flags(groups: Iterable[tuple[str, ...]] = FLAG_GROUPS) -> frozenset[str]:
    """Every spelling of every flag."""
    return frozenset(name for group in groups for name in group)


def spellings(flag: str, groups: Iterable[tuple[str, ...]] = FLAG_GROUPS) -> tuple[str, ...]:
    """All spellings of the option `flag` names (just (flag,) when it is unknown)."""
    return next((group for group in groups if flag in group), (flag,))


def value_count(flag: str, groups: Iterable[tuple[str, ...]] = FLAG_GROUPS,
                counts: Mapping[str, int] = VALUE_COUNTS) -> int:
    """How many values the option `flag` takes (0 for a switch or an unknown flag)."""
    return counts.get(spellings(flag, groups)[0], 0)


def read_spelling(word: str) -> str:
    """The spelling llama-server looks up for a word: `_` reads as `-` in a `--` word."""
    return word.replace("_", "-") if word.startswith("--") else word


class FlagProblem(enum.Enum):
    """Why part of an extra-flag line is not something llama-server takes."""

    UNSPLITTABLE = "unsplittable"  # an open quote: the line cannot be split into words
    NOT_A_FLAG = "not_a_flag"  # a word where a flag is due that does not start with '-'
    UNKNOWN = "unknown"  # not a spelling of any of its options
    MISSING_VALUE = "missing_value"  # the line ends before the option's values
    NO_VALUE_TAKEN = "no_value_taken"  # `--switch=value` for an option that takes no value


@dataclass(frozen=True)
class FlagUse:
    """One option on an extra-flag line: where, as written, as llama-server reads it, and its values."""

    line: int
    written: str  # the word as written, e.g. --host=0.0.0.0 or --api_key
    flag: str  # the spelling llama-server reads, e.g. --host or --api-key
    values: tuple[str, ...]
    complete: bool = True  # False when the line ended before all its values

    @property
    def words(self) -> list[str]:
        """The words llama-server is given for it: the flag, then each value."""
        return [self.flag, *self.values]


@dataclass(frozen=True)
class FlagIssue:
    """A part of an extra-flag line llama-server would not take."""

    line: int
    problem: FlagProblem
    word: str  # the word (the whole line when it cannot be split)
    flag: str = ""  # the spelling it was read as (UNKNOWN, MISSING_VALUE, NO_VALUE_TAKEN)


@dataclass(frozen=True)
class ParsedFlags:
    """Extra-flag text as llama-server would read it: the options it names and what it would refuse."""

    uses: tuple[FlagUse, ...]
    issues: tuple[FlagIssue, ...]

    def of(self, names: Iterable[str]) -> list[FlagUse]:
        """The uses of any spelling of the options named (e.g. ('--host',) finds every --host)."""
        wanted = {spelling for name in names for spelling in spellings(name)}
        return [use for use in self.uses if use.flag in wanted]


def parse_flags(text: str, groups: tuple[tuple[str, ...], ...] = FLAG_GROUPS,
                counts: Mapping[str, int] = VALUE_COUNTS) -> ParsedFlags:
    """The options and problems of extra-flag text: each line split as a shell splits it (quotes,
    `#` comments), each option found wherever it stands on its line, with its values."""
    known = known_flags(groups)
    uses: list[FlagUse] = []
    issues: list[FlagIssue] = []
    for number, line in enumerate(text.splitlines(), start=1):
        try:
            words = shlex.split(line, comments=True)
        except ValueError:
            issues.append(FlagIssue(number, FlagProblem.UNSPLITTABLE, line.strip()))
            continue
        index = 0
        while index < len(words):
            word = words[index]
            index += 1
            head, equals, inline = word.partition("=") if word.startswith("-") else (word, "", "")
            flag = read_spelling(head)
            if not flag.startswith("-") or flag == "-":
                issues.append(FlagIssue(number, FlagProblem.NOT_A_FLAG, word))
                continue
            if flag not in known:
                issues.append(FlagIssue(number, FlagProblem.UNKNOWN, word, flag))
                continue
            wanted = value_count(flag, groups, counts)
            if equals and wanted != 1:
                problem = FlagProblem.NO_VALUE_TAKEN if wanted == 0 else FlagProblem.MISSING_VALUE
                issues.append(FlagIssue(number, problem, word, flag))
                uses.append(FlagUse(number, word, flag, (inline,), complete=False))
                continue
            values = (inline,) if equals else tuple(words[index:index + wanted])
            index += 0 if equals else len(values)
            complete = len(values) == wanted
            if not complete:
                issues.append(FlagIssue(number, FlagProblem.MISSING_VALUE, word, flag))
            uses.append(FlagUse(number, word, flag, values, complete))
    return ParsedFlags(tuple(uses), tuple(issues))


__all__ = ["FLAG_GROUPS", "FlagIssue", "FlagProblem", "FlagUse", "ParsedFlags", "VALUE_COUNTS", "flag_groups",
           "flag_options", "known_flags", "parse_flags", "read_spelling", "spellings", "value_count"]
