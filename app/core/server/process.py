"""How a server kind's processes look in the process table, so a scan can tell one server from another."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class ProcessSignature:
    """A server's process: its program names (lower case, with and without `.exe`), the argument among the
    first two that makes the program a server ("" when the program is the server itself), how people call
    it, and where a service manager or a desktop app that runs it can be recognised ("" / empty: none)."""

    names: frozenset[str]
    label: str  # as people call the running server: the program, with its subcommand if it has one
    subcommand: str = ""
    systemd_unit: str = ""
    desktop_apps: frozenset[str] = frozenset()  # names of an ancestor process that runs the server

    def matches(self, name: str, cmdline: Sequence[str]) -> bool:
        """True when a process named `name`, with arguments `cmdline` (the program first), runs this server."""
        if name.lower() not in self.names:
            return False
        return not self.subcommand or self.subcommand in cmdline[1:3]


__all__ = ["ProcessSignature"]
