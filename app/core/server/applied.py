"""Settings put in force: how long they are kept, and how a form that was showing the old ones
takes the new ones without losing what its user was still editing."""

from __future__ import annotations

import dataclasses
from enum import Enum

from app.core.server.settings import ServerSettings


class SettingsKeeping(Enum):
    """Where applied settings go: saved for the next start, or kept for this session only."""

    SAVED = "saved"  # written to the settings file
    DEMO_SESSION = "demo_session"  # the embedded engine's demo: the user's saved settings are left as they are
    UNWRITABLE_SESSION = "unwritable_session"  # the settings folder cannot be written: kept in memory

    @property
    def saved(self) -> bool:
        """True when the settings outlive this session."""
        return self is SettingsKeeping.SAVED

    @classmethod
    def for_session(cls, demo: bool, folder_unwritable: bool) -> SettingsKeeping:
        """Where this session's applied settings go: the demo and an unwritable settings folder keep them
        for the session only (the demo first: it never writes, whatever the folder)."""
        return cls.DEMO_SESSION if demo else cls.UNWRITABLE_SESSION if folder_unwritable else cls.SAVED


def carry_edits(shown: ServerSettings, before: ServerSettings, after: ServerSettings) -> ServerSettings:
    """`after` with the changes `shown` made to `before` on top: settings applied elsewhere (a sweep's
    winner) replace the fields a form showed unchanged, and the user's pending edits stay."""
    changed = {f.name: getattr(shown, f.name) for f in dataclasses.fields(ServerSettings)
               if f.name != "options" and getattr(shown, f.name) != getattr(before, f.name)}
    old, new = dict(before.options), dict(shown.options)
    options = {name: new.get(name) for name in old.keys() | new.keys() if old.get(name) != new.get(name)}
    return after.replace(**changed).with_options(**options)


__all__ = ["SettingsKeeping", "carry_edits"]
