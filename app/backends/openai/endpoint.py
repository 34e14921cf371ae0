"""Where an OpenAI-compatible server is, and the key it wants: the base URL read once, the API key found once.

A base URL is given either way people copy it: the API's root (`https://host/v1`, as OpenAI's SDKs take it)
or the server's (`http://host:8000`, as vLLM prints it). It is normalised once, here: a trailing `/v1` is
dropped, since every request names its `/v1/...` path, and a missing port is the scheme's (443 for https)
or vLLM's 8000 for http. Any other path (a reverse proxy's prefix, `https://host/llm`) is kept.

The key is found in this order: the one given for this session (`remember`, from --api-key-env), the
environment's OLLAMA_DECK_API_KEY, the desktop's secret store (app.adapters.secrets, under the normalised
URL). It is read from the store once per URL and kept in memory for the session; it is never written to
settings or logs (no request text with its headers is shown or logged anywhere: httpx logs the URL only).
"""

from __future__ import annotations

import enum
import ipaddress
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from app.adapters.secrets import KEY_ENV, KeyStoreStatus, get_key
from app.core.server.url import ServerUrl, ServerUrlError, parse_server_url

HTTP_DEFAULT_PORT = 8000  # vLLM's and TGI's (SGLang's is 30000, llama-server's 8080: give the port)
HTTPS_DEFAULT_PORT = 443
API_ROOT = "/v1"


def parse_base_url(text: str) -> ServerUrl:
    """`text` as a server's base URL (http or https, `/v1` dropped, see the module docstring); ServerUrlError
    says what is wrong."""
    https = text.strip().lower().startswith("https://")
    url = parse_server_url(text, HTTPS_DEFAULT_PORT if https else HTTP_DEFAULT_PORT, allow_https=True)
    path = url.path
    if path == API_ROOT or path.endswith(API_ROOT):
        path = path[:-len(API_ROOT)]
    return ServerUrl(url.scheme, url.host, url.port, path)


def normalise(base_url: str) -> str:
    """The normalised base URL (scheme://host:port[/prefix], no /v1), or the text as given when it cannot be read."""
    try:
        return parse_base_url(base_url).base_url
    except ServerUrlError:
        return base_url.rstrip("/")


def is_loopback(base_url: str) -> bool:
    """True when the URL's host is this machine (localhost, 127.0.0.0/8, ::1)."""
    host = urlsplit(base_url if "://" in base_url else f"http://{base_url}").hostname or ""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def key_in_clear(base_url: str, has_key: bool) -> bool:
    """True when a key would cross the network unencrypted: http:// to another machine."""
    return has_key and urlsplit(normalise(base_url)).scheme == "http" and not is_loopback(base_url)


CLEAR_TEXT_WARNING = ("the API key is sent over plain http:// to {host}, which is not this machine: anyone on the "
                      "way can read it. Use https:// (a TLS proxy such as nginx in front of the server), or an SSH "
                      "tunnel to a loopback port.")


def header_safe(key: str) -> bool:
    """True when key can go in an HTTP header as it is: printable ASCII without spaces."""
    return all(33 <= ord(c) < 127 for c in key)


class KeySource(enum.Enum):
    """Where the key in use came from."""

    SESSION = "given for this session"  # --api-key-env, or set in the window
    ENVIRONMENT = f"the environment's {KEY_ENV}"
    SECRET_STORE = "the desktop's secret store"
    NONE = "no key"


@dataclass(frozen=True)
class FoundKey:
    """The key for one server (None: none was found) and where it came from; `store` is what the secret store
    said when it was asked (None: it was not asked)."""

    key: str | None
    source: KeySource
    store: KeyStoreStatus | None = None


class SessionAccess:
    """The keys of this run, by normalised base URL, and the full URLs behind plain ones (thread-safe: the GUI
    and the loop thread ask).

    A route maps the http://host:port the GUI's settings can hold onto the URL the user gave (https, a path
    prefix): the window keeps host and port in its settings, and every client made from them goes to the
    full URL."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._given: dict[str, str] = {}
        self._found: dict[str, FoundKey] = {}
        self._routes: dict[str, str] = {}

    def route(self, plain_url: str, full_url: str) -> None:
        """Send clients made for plain_url (scheme://host:port) to full_url instead, for the rest of this run."""
        with self._lock:
            self._routes[normalise(plain_url)] = normalise(full_url)

    def resolve(self, base_url: str) -> str:
        """The normalised URL a client for base_url talks to (its route's, where one was set)."""
        url = normalise(base_url)
        with self._lock:
            return self._routes.get(url, url)

    def remember(self, base_url: str, key: str) -> None:
        """Use `key` for base_url for the rest of this run (it wins over the environment and the store)."""
        with self._lock:
            self._given[normalise(base_url)] = key
            self._found.pop(normalise(base_url), None)

    def forget(self) -> None:
        """Drop every key and route of this run (the store is untouched)."""
        with self._lock:
            self._given.clear()
            self._found.clear()
            self._routes.clear()

    def find(self, base_url: str, environ: Mapping[str, str] | None = None) -> FoundKey:
        """The key for base_url (see the module docstring for the order); the store is asked once per URL."""
        url = normalise(base_url)
        with self._lock:
            if url in self._given:
                return FoundKey(self._given[url], KeySource.SESSION)
            env_key = (os.environ if environ is None else environ).get(KEY_ENV, "")
            if env_key:
                return FoundKey(env_key, KeySource.ENVIRONMENT)
            if url not in self._found:
                lookup = get_key(url)
                source = KeySource.SECRET_STORE if lookup.key else KeySource.NONE
                self._found[url] = FoundKey(lookup.key, source, lookup.status)
            return self._found[url]

    def headers(self, base_url: str) -> tuple[tuple[str, str], ...]:
        """The Authorization header for base_url, or none when no key is known."""
        key = self.find(base_url).key
        return (("Authorization", f"Bearer {key}"),) if key else ()


SESSION = SessionAccess()


__all__ = ["CLEAR_TEXT_WARNING", "FoundKey", "KeySource", "SESSION", "SessionAccess", "is_loopback",
           "header_safe", "key_in_clear", "normalise", "parse_base_url"]
