"""Whether a server start is open to others, and whether the user allowed it for that host.

The inference servers' APIs have no authentication: whoever can send them a request can run,
pull and delete models. A start is *exposed* when the server listens beyond loopback, or when a
backend setting opens it another way (a setting that lets any web origin in lets any web page the
user opens call it from the browser, even on 127.0.0.1). An exposed start needs the user's
permission, and that permission names the host it was given for: allowing 0.0.0.0 does not
allow 192.168.1.5. The CLI, the GUI and the supervisor all ask `assess`, so they cannot disagree.

This module imports nothing from the rest of the app, so the settings module can use it too.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # only for the signature of exposure_of; no import cycle at run time
    from app.core.server.mapping import TuningMapping
    from app.core.server.settings import ServerSettings

LOOPBACK_NAMES = ("localhost",)


def is_loopback(host: str) -> bool:
    """True when a server bound to host is reachable from this machine only (127.0.0.0/8, ::1, localhost)."""
    name = host.strip().strip("[]").rstrip(".").lower()
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False  # a hostname other than localhost may resolve to any interface


def same_host(first: str, second: str) -> bool:
    """True when two host texts name the same address ('::' and '0:0::0' do; names ignore case)."""
    a, b = (h.strip().strip("[]").rstrip(".").lower() for h in (first, second))
    if not a or not b:
        return False
    try:
        return ipaddress.ip_address(a) == ipaddress.ip_address(b)
    except ValueError:
        return a == b


def address_text(host: str, port: int) -> str:
    """host:port as a user reads it (IPv6 in brackets)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@dataclass(frozen=True)
class Exposure:
    """Who besides this machine's own programs could use a server started with some settings."""

    host: str
    port: int
    network: bool  # it listens beyond loopback
    others: tuple[str, ...] = ()  # who else a backend setting lets in, e.g. "any web page you open (<its setting>)"
    allowed_for: str = ""  # the host the user's permission names; '' = no permission

    @property
    def exposed(self) -> bool:
        """True when anyone but this machine's own programs could call the server."""
        return self.network or bool(self.others)

    @property
    def allowed(self) -> bool:
        """True when the start may go ahead: nothing is exposed, or the permission names this host."""
        return not self.exposed or same_host(self.allowed_for, self.host)

    @property
    def address(self) -> str:
        """host:port the server listens on."""
        return address_text(self.host, self.port)

    def _who(self) -> str:
        who = ([f"anyone who can reach {self.address}"] if self.network else []) + list(self.others)
        return " and ".join(who)

    def warning(self) -> str:
        """One sentence naming host:port and who can use the server; '' when nothing is exposed."""
        if not self.exposed:
            return ""
        return (f"The server on {self.address} is open to others: {self._who()} can use it and delete "
                "your models, because its API has no authentication.")

    def refusal(self) -> str:
        """Why an exposed start without permission does not go ahead; '' when it may."""
        if self.allowed:
            return ""
        return (f"Did not start the server on {self.address}: {self._who()} could use it and delete your "
                f"models (its API has no authentication), and access by others was not allowed for "
                f"{self.host}.")


def assess(host: str, port: int, allowed_for: str, others: tuple[str, ...] = ()) -> Exposure:
    """The exposure of a start on host:port (allowed_for: the host the permission names; others:
    what the backend's settings let in besides the bind address)."""
    return Exposure(host, port, network=not is_loopback(host), others=tuple(others), allowed_for=allowed_for)


def exposure_of(settings: ServerSettings, mapping: TuningMapping) -> Exposure:
    """assess() for settings, with what the backend's mapping says its extra settings open."""
    return assess(settings.host, settings.port, settings.network_allowed_for, tuple(mapping.exposures(settings)))


__all__ = ["Exposure", "LOOPBACK_NAMES", "address_text", "assess", "exposure_of", "is_loopback", "same_host"]
