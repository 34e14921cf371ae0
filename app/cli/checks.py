"""Checks the headless commands share: numeric ranges with their reasons, URLs, input files, output paths.

Every problem is an ArgProblem whose text is one line naming the flag, the value and why; the
commands print it as `ollama-deck NAME: …` and exit 2. Ranges are checked after argparse has read
the numbers (so `--parallel 0` and `--ctx nan` read the same way) and before anything starts, so a
run never ends on input that was wrong from the beginning.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from app.core.server.url import ServerUrl, ServerUrlError, parse_server_url

MAX_INPUT_BYTES = 64 * 1024 * 1024  # a show reply with every tensor is ~1 MB; a prompt file is text


class ArgProblem(ValueError):
    """Unusable command-line input; the text is the whole one-line message."""


@dataclass(frozen=True)
class Range:
    """Allowed values of one numeric flag: low..high (low itself excluded when `above`), and why."""

    flag: str
    low: float
    high: float
    unit: str
    why: str
    above: bool = False  # the value must be strictly above `low` (a duration of 0 s measures nothing)

    @property
    def dest(self) -> str:
        """The argparse attribute the flag fills."""
        return self.flag.lstrip("-").replace("-", "_")

    def problem(self, value: float) -> str:
        """Why `value` is refused, or '' when it is allowed."""
        if isinstance(value, float) and not math.isfinite(value):
            wrong = "must be a finite number"
        elif value < self.low or (self.above and value == self.low):
            wrong = (f"must be above {_num(self.low)}" if self.above
                     else "must not be negative" if self.low == 0 else f"must be at least {_num(self.low)}")
        elif value > self.high:
            wrong = f"must be at most {_num(self.high)}"
        else:
            return ""
        allowed = f"{'above ' if self.above else ''}{_num(self.low)} to {_num(self.high)} {self.unit}".rstrip()
        return f"{self.flag} {wrong}, got {_num(value)} (allowed: {allowed}; {self.why})"


def _num(value: float) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
        value = int(value)
    if isinstance(value, int) and abs(value) >= 10**16:
        return f"{value:.3g}"
    return f"{value:g}" if isinstance(value, float) else str(value)


def check_ranges(args: argparse.Namespace, ranges: Iterable[Range]) -> None:
    """ArgProblem for the first flag given outside its range (flags left out are not checked)."""
    for rule in ranges:
        value = getattr(args, rule.dest, None)
        if value is not None and (text := rule.problem(value)):
            raise ArgProblem(text)


def check_values(flag: str, values: Iterable[int], rule: Range) -> None:
    """ArgProblem for the first of a comma list's values outside `rule` (its flag named as `flag`)."""
    for value in values:
        if text := rule.problem(value):
            raise ArgProblem(text.replace(rule.flag, flag, 1))


def server_url(flag: str, text: str, *, allow_path: bool = True) -> ServerUrl:
    """The checked URL given to `flag`; ArgProblem with the parser's reason otherwise."""
    try:
        return parse_server_url(text, allow_path=allow_path)
    except ServerUrlError as exc:
        raise ArgProblem(f"{flag}: {exc.user_text()}") from None


def read_text_file(flag: str, path: str, what: str) -> str:
    """The UTF-8 text of the file given to `flag` (at most MAX_INPUT_BYTES); ArgProblem saying why not."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_INPUT_BYTES + 1)
    except FileNotFoundError:
        raise ArgProblem(f"cannot read {flag} {path}: no such file") from None
    except OSError as exc:
        raise ArgProblem(f"cannot read {flag} {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_INPUT_BYTES:
        raise ArgProblem(f"{flag} {path} is larger than {MAX_INPUT_BYTES // (1024 * 1024)} MiB; {what} is much "
                         "smaller than that")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ArgProblem(f"{flag} {path} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
                         f"give {what}") from None


def check_output_path(flag: str, path: str) -> None:
    """ArgProblem unless `path` can be written: '-' (stdout), or a file (new or not) in a writable folder."""
    if path == "-":
        return
    if not path:
        raise ArgProblem(f"{flag}: the file name is empty")
    target = Path(path)
    try:
        if target.is_dir():
            raise ArgProblem(f"{flag} {path} is a folder; give a file name in it, e.g. {target / 'results.out'}")
        folder = target.parent
        if not folder.is_dir():
            raise ArgProblem(f"{flag} {path}: the folder {folder} does not exist; create it first or pick another")
        if target.exists() and not os.access(target, os.W_OK):
            raise ArgProblem(f"{flag} {path} exists and cannot be written (no permission)")
        if not target.exists() and not os.access(folder, os.W_OK | os.X_OK):
            raise ArgProblem(f"{flag} {path}: the folder {folder} cannot be written (no permission)")
    except OSError as exc:  # a name too long for the file system, a loop of links
        raise ArgProblem(f"{flag} {path}: {exc.strerror or exc}") from None


def check_config_dir(flag: str, path: str | None) -> None:
    """ArgProblem when `path` names something that is not a folder (a missing one is made when needed)."""
    if path is None:
        return
    target = Path(path)
    try:
        if target.exists() and not target.is_dir():
            raise ArgProblem(f"{flag} {path} is a file, not a folder; give the folder that holds settings.json")
    except OSError as exc:  # a name too long for the file system, a loop of links
        raise ArgProblem(f"{flag} {path}: {exc.strerror or exc}") from None


def check_text(flag: str, value: str | None, *, empty_ok: bool = True) -> None:
    """ArgProblem for an empty (when not allowed) value."""
    if value is not None and not empty_ok and not value.strip():
        raise ArgProblem(f"{flag} is empty; give a value")


def one_line(text: str) -> str:
    """text with line breaks and other control characters escaped, so a message stays one line."""
    return "".join(c if c.isprintable() or c == " " else repr(c)[1:-1] for c in text)


def undecodable(argv: Iterable[str]) -> str:
    """One line naming the first argument that is not valid UTF-8 (the shell passed raw bytes), or ''."""
    for arg in argv:
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            raw = os.fsencode(arg)
            return f"the argument {raw!r} is not valid UTF-8 text; pass names and prompts as UTF-8"
    return ""


__all__ = ["ArgProblem", "MAX_INPUT_BYTES", "Range", "check_output_path", "check_ranges", "check_text",
           "check_values", "one_line", "read_text_file", "server_url", "undecodable"]
