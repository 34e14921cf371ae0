"""What documents saved by earlier releases leave unsaid or call by an earlier name.

Core reads and writes its documents (settings, run documents) in these terms; the values themselves are facts
of the files, stated where the files are read and written (app.adapters.storage.saved_format)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class SavedFormat:
    """The names earlier formats used. The default (nothing unsaid, no earlier names) reads and writes only what
    the current format says."""

    # The server a document that names none was for (written before servers had kinds).
    default_backend: str = ""
    # That server's own knobs which settings format 1 kept beside the shared fields (now its options).
    option_fields: tuple[str, ...] = ()
    # A run fingerprint's field -> the key it is saved under, where that differs from the field's name.
    fingerprint_keys: Mapping[str, str] = field(default_factory=dict)

    def fingerprint_key(self, name: str) -> str:
        """The key fingerprint field `name` is saved under."""
        return self.fingerprint_keys.get(name, name)


__all__ = ["SavedFormat"]
