"""The fleet file: several inference servers in one window, an optional balancer in front of some of them,
and an optional Prometheus server that knows the hosts the app cannot sample itself.

    [[server]]                       # one per endpoint
    name = "box-a"                   # unique, shown in the UI
    url = "http://127.0.0.1:8081"
    backend = "NAME"                 # a backend's registry name (the caller passes the known ones)
    host = "box-a"                   # optional: the host's label for Prometheus queries (instance/Hostname)
    [balancer]                       # optional
    name = "nginx"
    url = "http://127.0.0.1:8080"
    servers = ["box-a", "box-b"]     # names of [[server]] entries behind it
    [prometheus]                     # optional
    url = "http://127.0.0.1:9090"

`parse_fleet` reads it into frozen dataclasses, or raises FleetError: one problem (a FleetProblem), the
field it is in (`server[1].backend`), its line in the file where the field can be found, and what to
write instead. Nothing else escapes it, whatever the text. The backends' names come in from the caller
(core cannot import the registry). A URL beyond loopback is allowed (the app is the client there) but
noted in `FleetFile.notes`, so the page can say the fleet's traffic leaves this machine.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from app.core.errors import DeckError
from app.core.server.exposure import is_loopback
from app.core.server.url import ServerUrl, ServerUrlError, parse_server_url

MAX_SERVERS = 64
MAX_NAME_CHARS = 64
PROMETHEUS_PORT = 9090  # Prometheus's own default, used when its URL names no port
_EXAMPLE = """\
[[server]]
name = "box-a"
url = "http://127.0.0.1:8081"
backend = "{backend}"
host = "box-a"

[[server]]
name = "box-b"
url = "http://127.0.0.1:8082"
backend = "{backend}"
host = "box-b"

[balancer]
name = "nginx"
url = "http://127.0.0.1:8080"
servers = ["box-a", "box-b"]

[prometheus]
url = "http://127.0.0.1:9090"
"""


def example_fleet(backend: str) -> str:
    """A complete fleet file of two servers of `backend` behind a balancer, with a Prometheus."""
    return _EXAMPLE.replace("{backend}", backend)


class FleetProblem(Enum):
    """What is wrong with a fleet file."""

    NOT_TOML = "not_toml"
    NO_SERVERS = "no_servers"
    TOO_MANY_SERVERS = "too_many_servers"
    UNKNOWN_KEY = "unknown_key"
    MISSING_FIELD = "missing_field"
    WRONG_TYPE = "wrong_type"
    BAD_NAME = "bad_name"
    DUPLICATE_NAME = "duplicate_name"
    UNKNOWN_BACKEND = "unknown_backend"
    BAD_URL = "bad_url"
    UNKNOWN_BALANCED_SERVER = "unknown_balanced_server"


class FleetError(DeckError, ValueError):
    """A fleet file that cannot be used: the problem, where (field and line), and what to write instead."""

    def __init__(self, problem: FleetProblem, field: str, message: str, hint: str, line: int | None = None) -> None:
        where = f"line {line}, {field}" if line is not None else field
        super().__init__(f"{where}: {message}" if field else message, hint)
        self.problem = problem
        self.field = field
        self.line = line


class FleetNoteKind(Enum):
    """Something a valid fleet file does that is worth saying."""

    BEYOND_LOOPBACK = "beyond_loopback"  # a URL reaches another machine: requests (prompts) cross the network
    PLAIN_HTTP_BEYOND_LOOPBACK = "plain_http_beyond_loopback"  # ... in clear text


@dataclass(frozen=True)
class FleetNote:
    kind: FleetNoteKind
    field: str
    line: int | None
    text: str


class _Reached:
    """Something the app reaches at a checked URL."""

    url: ServerUrl

    @property
    def base_url(self) -> str:
        """The URL clients are given: scheme://host:port[/path]."""
        return self.url.base_url


@dataclass(frozen=True)
class FleetServer(_Reached):
    """One endpoint: a unique name, its URL, the registry name of its backend, and its host's label in
    Prometheus ('' when not given: then the URL's host is used)."""

    name: str
    url: ServerUrl
    backend: str
    host: str = ""

    @property
    def host_label(self) -> str:
        """The label Prometheus series of this server's host are matched against: `host`, else the URL's host."""
        return self.host or self.url.host

    @property
    def loopback(self) -> bool:
        return is_loopback(self.url.host)


@dataclass(frozen=True)
class Balancer(_Reached):
    """A load balancer in front of some of the servers (by name, in the file's order)."""

    name: str
    url: ServerUrl
    servers: tuple[str, ...]


@dataclass(frozen=True)
class PrometheusSource(_Reached):
    """A Prometheus server whose HTTP API knows the fleet's hosts."""

    url: ServerUrl


@dataclass(frozen=True)
class FleetFile:
    servers: tuple[FleetServer, ...]
    balancer: Balancer | None = None
    prometheus: PrometheusSource | None = None
    notes: tuple[FleetNote, ...] = ()

    def server(self, name: str) -> FleetServer | None:
        return next((s for s in self.servers if s.name == name), None)

    def behind_balancer(self) -> tuple[FleetServer, ...]:
        """The servers behind the balancer, in its order (none without a balancer; the parser checked the names)."""
        if self.balancer is None:
            return ()
        return tuple(s for s in (self.server(name) for name in self.balancer.servers) if s is not None)


_TOP_KEYS = frozenset({"server", "balancer", "prometheus"})
_SERVER_KEYS = frozenset({"name", "url", "backend", "host"})
_BALANCER_KEYS = frozenset({"name", "url", "servers"})
_PROMETHEUS_KEYS = frozenset({"url"})
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._:@/+-]*$")
_HEADER_RE = re.compile(r"^\s*\[\[?\s*([A-Za-z0-9_.\"' -]+?)\s*\]\]?")


class _Lines:
    """Finds the line a field was written on (tomllib gives values, not places): the n-th header of a
    table, then the first `key =` under it. A best effort for the message; None when not found."""

    def __init__(self, text: str) -> None:
        self._lines = text.splitlines()

    def header(self, table: str, index: int) -> int | None:
        seen = -1
        for number, line in enumerate(self._lines, 1):
            match = _HEADER_RE.match(line)
            if match and match.group(1).strip("\"' ") == table:
                seen += 1
                if seen == index:
                    return number
        return None

    def key(self, table: str, index: int, key: str) -> int | None:
        start = self.header(table, index)
        if start is None:
            return None
        pattern = re.compile(rf"^\s*[\"']?{re.escape(key)}[\"']?\s*=")
        for number in range(start + 1, len(self._lines) + 1):
            line = self._lines[number - 1]
            if _HEADER_RE.match(line):
                break
            if pattern.match(line):
                return number
        return start


class _Reader:
    def __init__(self, text: str, backends: Collection[str]) -> None:
        self.lines = _Lines(text)
        self.backends = tuple(backends)
        self.notes: list[FleetNote] = []

    def fail(self, problem: FleetProblem, table: str, index: int, key: str, message: str, hint: str) -> FleetError:
        field = _field(table, index, key)
        line = self.lines.key(table, index, key) if key else self.lines.header(table, index)
        return FleetError(problem, field, message, hint, line)

    def table(self, data: Any, table: str, index: int, keys: frozenset[str]) -> dict[str, Any]:
        if not isinstance(data, dict):
            header = f"[[{table}]]" if table == "server" else f"[{table}]"
            raise self.fail(FleetProblem.WRONG_TYPE, table, index, "", f"{table} is a {_kind(data)}, not a table",
                            f"write it as a {header} table with {', '.join(sorted(keys))}")
        unknown = sorted(str(k) for k in data if k not in keys)
        if unknown:
            raise self.fail(FleetProblem.UNKNOWN_KEY, table, index, unknown[0], f"{unknown[0]!r} is not a key here",
                            f"a [{table}] table takes {', '.join(sorted(keys))}; check the spelling")
        return data

    def text(self, data: Mapping[str, Any], table: str, index: int, key: str, *, required: bool = True) -> str:
        value = data.get(key)
        if value is None:
            if required:
                raise self.fail(FleetProblem.MISSING_FIELD, table, index, "", f"{key} is missing",
                                f'add {key} = "…" to this table{_example(key)}')
            return ""
        if not isinstance(value, str):
            raise self.fail(FleetProblem.WRONG_TYPE, table, index, key, f"{key} is a {_kind(value)}, not text",
                            f'write it in quotes, e.g. {key} = "{_EXAMPLES.get(key, "…")}"')
        return value

    def name(self, data: Mapping[str, Any], table: str, index: int, key: str = "name", *,
             required: bool = True) -> str:
        value = self.text(data, table, index, key, required=required).strip()
        if not value and not required:
            return ""
        if len(value) > MAX_NAME_CHARS or not _NAME_RE.match(value) or not value.isprintable():
            shown = value if len(value) <= 40 else value[:37] + "..."
            raise self.fail(FleetProblem.BAD_NAME, table, index, key, f"{shown!r} cannot be used as a {key}",
                            f"use 1 to {MAX_NAME_CHARS} letters, digits and . _ - : @ / + or spaces, starting "
                            f'with a letter or digit, e.g. {key} = "{_EXAMPLES.get(key, "box-a")}"')
        return value

    def url(self, data: Mapping[str, Any], table: str, index: int, default_port: int | None) -> ServerUrl:
        text = self.text(data, table, index, "url")
        try:
            parsed = parse_server_url(text, 0, allow_https=True)
        except ServerUrlError as exc:
            raise self.fail(FleetProblem.BAD_URL, table, index, "url", exc.message,
                            f'write an http(s) URL with host and port, e.g. url = "{_EXAMPLES["url"]}"') from None
        if parsed.port == 0:
            if parsed.scheme == "https":
                parsed = ServerUrl(parsed.scheme, parsed.host, 443, parsed.path)
            elif default_port is not None:
                parsed = ServerUrl(parsed.scheme, parsed.host, default_port, parsed.path)
            else:
                host = f"[{parsed.host}]" if ":" in parsed.host else parsed.host
                raise self.fail(FleetProblem.BAD_URL, table, index, "url", f"{text.strip()!r} names no port",
                                f'write the port the server listens on, e.g. url = "http://{host}:8080"')
        if not is_loopback(parsed.host):
            field = _field(table, index, "url")
            line = self.lines.key(table, index, "url")
            self.notes.append(FleetNote(
                FleetNoteKind.BEYOND_LOOPBACK, field, line,
                f"{field} ({parsed.base_url}) is on another machine: what the app sends it crosses the network"))
            if parsed.scheme == "http":
                self.notes.append(FleetNote(
                    FleetNoteKind.PLAIN_HTTP_BEYOND_LOOPBACK, field, line,
                    f"{field} is plain http: prompts and replies cross the network unencrypted"))
        return parsed


_EXAMPLES = {"name": "box-a", "url": "http://127.0.0.1:8081", "host": "box-a"}


def _example(key: str) -> str:
    return f', e.g. {key} = "{_EXAMPLES[key]}"' if key in _EXAMPLES else ""


def _field(table: str, index: int, key: str) -> str:
    base = f"server[{index}]" if table == "server" else table
    return f"{base}.{key}" if key else base


def _kind(value: object) -> str:
    return {bool: "yes/no", int: "number", float: "number", str: "text", list: "list",
            dict: "table"}.get(type(value), type(value).__name__)


def parse_fleet(text: str, backends: Collection[str]) -> FleetFile:
    """The fleet described by TOML `text`; `backends`: the registry's names. FleetError (only) when it cannot be used."""
    try:
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError, RecursionError) as exc:
        line_match = re.search(r"line (\d+)", str(exc))
        line = int(line_match.group(1)) if line_match else None
        raise FleetError(FleetProblem.NOT_TOML, "", f"the fleet file is not valid TOML: {exc}",
                         "fix the line named (strings in double quotes, one key = value a line); see the example "
                         "with --fleet in the README", line) from None
    reader = _Reader(text, backends)
    unknown = sorted(k for k in data if k not in _TOP_KEYS)
    if unknown:
        raise FleetError(FleetProblem.UNKNOWN_KEY, unknown[0], f"{unknown[0]!r} is not a part of a fleet file",
                         "write [[server]] tables, and optionally one [balancer] and one [prometheus]",
                         reader.lines.header(unknown[0], 0))
    raw_servers = data.get("server")
    if raw_servers is None or raw_servers == []:
        raise FleetError(FleetProblem.NO_SERVERS, "server", "the fleet file lists no server",
                         "add one [[server]] table per endpoint, e.g.\n"
                         + example_fleet(next(iter(backends), "NAME")).split("\n\n")[0])
    if not isinstance(raw_servers, list):
        raise FleetError(FleetProblem.WRONG_TYPE, "server", "server is a single table, not a list of them",
                         "write each endpoint under its own [[server]] header (two brackets)",
                         reader.lines.header("server", 0))
    if len(raw_servers) > MAX_SERVERS:
        raise FleetError(FleetProblem.TOO_MANY_SERVERS, "server", f"{len(raw_servers)} servers are listed",
                         f"list at most {MAX_SERVERS}")
    servers: list[FleetServer] = []
    for index, raw in enumerate(raw_servers):
        table = reader.table(raw, "server", index, _SERVER_KEYS)
        name = reader.name(table, "server", index)
        previous = next((s for s in servers if s.name == name), None)
        if previous is not None:
            raise reader.fail(FleetProblem.DUPLICATE_NAME, "server", index, "name",
                              f"the name {name!r} is already used by server[{servers.index(previous)}]",
                              f'give each server its own name, e.g. name = "{name}-2"')
        backend = reader.text(table, "server", index, "backend").strip()
        if backend not in reader.backends:
            known = " | ".join(reader.backends) or "(none registered)"
            raise reader.fail(FleetProblem.UNKNOWN_BACKEND, "server", index, "backend",
                              f"{backend[:40]!r} is not a backend this app knows",
                              f"write one of: {known}")
        url = reader.url(table, "server", index, None)
        host = reader.name(table, "server", index, "host", required=False)
        servers.append(FleetServer(name, url, backend, host))
    balancer = None
    if "balancer" in data:
        table = reader.table(data["balancer"], "balancer", 0, _BALANCER_KEYS)
        name = reader.name(table, "balancer", 0)
        url = reader.url(table, "balancer", 0, None)
        behind = table.get("servers", [])
        if not isinstance(behind, list) or not all(isinstance(n, str) for n in behind):
            raise reader.fail(FleetProblem.WRONG_TYPE, "balancer", 0, "servers", "servers is not a list of names",
                              f'write servers = ["{servers[0].name}", …] with the names of [[server]] entries')
        names = [s.name for s in servers]
        for member in behind:
            if member.strip() not in names:
                raise reader.fail(FleetProblem.UNKNOWN_BALANCED_SERVER, "balancer", 0, "servers",
                                  f"{member[:40]!r} is not the name of a [[server]] in this file",
                                  f"use the names given to [[server]] entries: {', '.join(names)}")
        members = tuple(dict.fromkeys(m.strip() for m in behind))
        balancer = Balancer(name, url, members)
    prometheus = None
    if "prometheus" in data:
        table = reader.table(data["prometheus"], "prometheus", 0, _PROMETHEUS_KEYS)
        prometheus = PrometheusSource(reader.url(table, "prometheus", 0, PROMETHEUS_PORT))
    return FleetFile(tuple(servers), balancer, prometheus, tuple(reader.notes))


__all__ = ["Balancer", "FleetError", "FleetFile", "FleetNote", "FleetNoteKind", "FleetProblem",
           "FleetServer", "PrometheusSource", "example_fleet", "parse_fleet"]
