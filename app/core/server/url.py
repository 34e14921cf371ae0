"""One reading of a server URL for every command and the GUI's --url.

A server URL is `[http://]HOST[:PORT][/PATH]`: HOST a hostname, an IPv4 address or an IPv6 address in
brackets; PORT 1-65535, the backend's default when left out (not HTTP's 80: a bare `http://gpu-box`
means the inference server on that machine); PATH a prefix a reverse proxy may put in front of the
API, kept as given. Anything a server URL cannot mean is refused with the reason, rather than
quietly dropped: credentials (`user:pass@`), a query or fragment, a scheme other than http, a port
out of range, a bare IPv6 address whose colons cannot be told from a port.

https is refused by default: the streaming transport (app/adapters/http) is plain HTTP over a socket
whose kernel receive stamps time every token, and the local servers serve plain HTTP; a TLS layer
would sit between those stamps and the bytes. Callers that could speak TLS may pass allow_https.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from dataclasses import dataclass

from app.core.errors import DeckError
from app.core.server.settings import ServerSettings

SCHEMES = ("http", "https")
# RFC 1123 labels; underscores too, because container and compose service names carry them.
_LABEL_RE = re.compile(r"^(?!-)[A-Za-z0-9_-]{1,63}(?<!-)$")
_SCHEME_RE = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_PATH_RE = re.compile(r"^[A-Za-z0-9._~!$&'()*+,;=:@%/-]*$")
EXAMPLE = "http://127.0.0.1:11434"


class ServerUrlError(DeckError, ValueError):
    """A text that cannot be used as a server URL; the message says why (a ValueError too, for old callers)."""

    hint = f"Write it as http://HOST:PORT, e.g. {EXAMPLE}."


@dataclass(frozen=True)
class ServerUrl:
    """A checked server URL: scheme, host (IPv6 without brackets), port and path prefix ('' or '/…')."""

    scheme: str
    host: str
    port: int
    path: str = ""

    @property
    def authority(self) -> str:
        """host:port as it goes into a URL (IPv6 in brackets)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    @property
    def base_url(self) -> str:
        """The URL clients are given: scheme://host:port[/path], never a trailing slash."""
        return f"{self.scheme}://{self.authority}{self.path}"


def default_port() -> int:
    """The port a server listens on when its settings do not say (the settings' default port)."""
    return ServerSettings().port


def parse_server_url(text: str, port: int | None = None, *, allow_https: bool = False,
                     allow_path: bool = True) -> ServerUrl:
    """Read `text` as a server URL (port: the default when it names none); ServerUrlError says what is wrong."""
    shown = text if len(text) <= 80 else text[:77] + "..."

    def bad(reason: str) -> ServerUrlError:
        return ServerUrlError(f"{shown!r} is not a server URL: {reason}")

    raw = text.strip()
    if not raw:
        raise bad("it is empty")
    if not raw.isascii() or not raw.isprintable() or any(c.isspace() for c in raw):
        raise bad("it may hold only printable ASCII without spaces (write an international host name "
                  "in its xn-- form)")
    scheme = "http"
    match = _SCHEME_RE.match(raw)
    if match:
        scheme = match.group(1).lower()
        raw = raw[match.end():]
        if scheme not in SCHEMES:
            raise bad(f"the scheme {scheme}:// is not supported; use http://")
    elif "://" in raw or raw.lower().startswith(("http:", "https:")):
        raise bad("write the scheme as http:// (two slashes)")
    if scheme == "https" and not allow_https:
        raise ServerUrlError(
            f"{shown!r}: https is not supported; ollama-deck talks plain http:// to the server (the local "
            "servers serve only http); use http://HOST:PORT, or reach a TLS-only server through an SSH tunnel or a local proxy",
            hint="")
    if "?" in raw or "#" in raw:
        raise bad("a server URL takes no query (?…) or fragment (#…)")
    authority, slash, path = raw.partition("/")
    if "@" in authority:
        raise bad("user names and passwords (user:pass@) are not supported; the server's API has no login")
    host, port_text = _split_authority(authority, bad)
    _check_host(host, bad)
    number = default_port() if port is None else port
    if port_text is not None:
        if not port_text:
            raise bad("the port after ':' is missing")
        if not port_text.isdigit() or len(port_text) > 5 or not 1 <= int(port_text) <= 65535:
            raise bad(f"the port {port_text!r} is not a number from 1 to 65535")
        number = int(port_text)
    path = ("/" + path).rstrip("/") if slash else ""
    if path and not _PATH_RE.match(path):
        raise bad(f"the path {path!r} has characters a URL path cannot hold")
    if path and not allow_path:
        raise bad(f"a path ({path}) cannot be used here, only host and port")
    return ServerUrl(scheme, host, number, path)


def _split_authority(authority: str, bad: Callable[[str], ServerUrlError]) -> tuple[str, str | None]:
    """(host, port text or None) of `host[:port]` or `[ipv6][:port]`."""
    if authority.startswith("["):
        end = authority.find("]")
        if end < 0:
            raise bad("the '[' of an IPv6 address has no ']'")
        host, rest = authority[1:end], authority[end + 1:]
        if rest and not rest.startswith(":"):
            raise bad(f"{rest!r} after the IPv6 address is not ':PORT'")
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise bad(f"[{host}] is not an IPv6 address") from None
        return host, (rest[1:] if rest else None)
    if authority.count(":") > 1:
        raise bad("an IPv6 address goes in brackets, e.g. http://[::1]:11434")
    host, colon, port_text = authority.partition(":")
    return host, (port_text if colon else None)


def _check_host(host: str, bad: Callable[[str], ServerUrlError]) -> None:
    if not host:
        raise bad("the host is missing")
    if ":" in host:
        return  # checked as IPv6 already
    if re.fullmatch(r"[0-9.]+", host):
        try:
            ipaddress.IPv4Address(host)
        except ValueError:
            # getaddrinfo would read "99999" as the IPv4 address 0.1.134.159: refuse what it would guess.
            raise bad(f"{host!r} is not an IPv4 address") from None
        return
    labels = host[:-1].split(".") if host.endswith(".") else host.split(".")
    if len(host) > 253 or not all(_LABEL_RE.match(label) for label in labels):
        raise bad(f"{host!r} is not a host name or IP address")


def settings_for_url(settings: ServerSettings, url: str) -> ServerSettings:
    """The settings with host and port taken from a URL like http://127.0.0.1:11434 (ServerUrlError, a ValueError, if not)."""
    parsed = parse_server_url(url, allow_path=False)
    return settings.replace(host=parsed.host, port=parsed.port)


__all__ = ["EXAMPLE", "SCHEMES", "ServerUrl", "ServerUrlError", "default_port", "parse_server_url", "settings_for_url"]
