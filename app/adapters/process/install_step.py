"""What one `pip install` run installs (stdlib only, so finding the engine never needs more)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class InstallStep:
    """One `pip install` run: a label for people and the arguments after `pip install`."""

    label: str
    args: tuple[str, ...]
