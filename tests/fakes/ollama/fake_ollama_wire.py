"""Wire level of the stand-in Ollama server: JSON and NDJSON replies, client-gone detection, log lines.

Replies match what Gin writes for Ollama: `c.JSON` bodies with `application/json; charset=utf-8`
and a Content-Length; streams with `application/x-ndjson` in chunked transfer encoding, one JSON
object per line, headers sent with the first line (so an error before any output is a plain
JSON error reply, and one after it is an in-band `{"error": ...}` line).
"""

from __future__ import annotations

import datetime as dt
import json
import re
import select
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler
from typing import Any


class ClientGone(Exception):
    """The client closed its connection (or the server is stopping) while a reply was pending."""


def go_json(obj: Any) -> bytes:
    """Compact JSON like Go's encoding/json (no spaces, UTF-8 kept)."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def rfc3339_utc_now() -> str:
    """`created_at` as Go marshals time.Now().UTC(): RFC 3339 with trimmed nanoseconds."""
    ns = time.time_ns()
    base = dt.datetime.fromtimestamp(ns // 1_000_000_000, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")
    frac = f"{ns % 1_000_000_000:09d}".rstrip("0")
    return f"{base}.{frac}Z" if frac else f"{base}Z"


def rfc3339_local(epoch_s: float) -> str:
    """A local time with offset, as `expires_at` and `modified_at` appear (microsecond precision)."""
    if epoch_s > 253_402_300_000:  # beyond year 9999: keep_alive forever
        epoch_s = time.time() + 292 * 365.25 * 86400
    return dt.datetime.fromtimestamp(epoch_s).astimezone().isoformat(timespec="microseconds")


_GO_UNITS_NS = {"ns": 1, "us": 1_000, "µs": 1_000, "μs": 1_000, "ms": 1_000_000,
                "s": 1_000_000_000, "m": 60_000_000_000, "h": 3_600_000_000_000}
_GO_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
FOREVER_S = float("inf")


def parse_keep_alive(value: Any) -> float:
    """Seconds from a keep_alive value (number = seconds, Go duration string; negative = forever)."""
    if isinstance(value, bool):
        raise ValueError("json: cannot unmarshal bool into Go value of type api.Duration")
    if isinstance(value, (int, float)):
        return FOREVER_S if value < 0 else float(value)
    if not isinstance(value, str):
        raise ValueError(f"json: cannot unmarshal {type(value).__name__} into Go value of type api.Duration")
    text = value.strip()
    sign = -1 if text.startswith("-") else 1
    body = text.lstrip("+-")
    if body == "0":
        return 0.0
    pos, total_ns = 0, 0.0
    for match in _GO_PART.finditer(body):
        if match.start() != pos:
            break
        total_ns += float(match.group(1)) * _GO_UNITS_NS[match.group(2)]
        pos = match.end()
    if not body or pos != len(body):
        unit_missing = bool(body) and re.fullmatch(r"\d+\.?\d*", body)
        reason = "missing unit in duration" if unit_missing else "invalid duration"
        raise ValueError(f'time: {reason} "{value}"')
    return FOREVER_S if sign < 0 else total_ns / 1e9


def go_duration(ns: int) -> str:
    """A duration the way Go's time.Duration.String prints it ("1.5ms", "2m3.25s")."""
    if ns < 1_000:
        return f"{ns}ns"
    if ns < 1_000_000:
        return f"{ns / 1e3:.3f}".rstrip("0").rstrip(".") + "µs"
    if ns < 1_000_000_000:
        return f"{ns / 1e6:.6f}".rstrip("0").rstrip(".") + "ms"
    hours, rem = divmod(ns, 3_600_000_000_000)
    minutes, rem = divmod(rem, 60_000_000_000)
    seconds = f"{rem / 1e9:.9f}".rstrip("0").rstrip(".") + "s"
    if hours:
        return f"{hours}h{minutes}m{seconds}"
    return f"{minutes}m{seconds}" if minutes else seconds


def gin_log_line(status: int, latency_ns: int, client_ip: str, method: str, path: str) -> str:
    """One Gin access-log line as `ollama serve` prints it (no colour)."""
    stamp = time.strftime("%Y/%m/%d - %H:%M:%S")
    return f'[GIN] {stamp} | {status:3d} | {go_duration(latency_ns):>13} | {client_ip:>15} | {method:<7} "{path}"'


def slog_line(level: str, source: str, msg: str, **attrs: Any) -> str:
    """One structured log line in Go's slog text format, as Ollama writes them."""
    stamp = dt.datetime.now().astimezone().isoformat(timespec="milliseconds")
    parts = [f"time={stamp}", f"level={level}", f"source={source}", f"msg={json.dumps(msg)}"]
    for key, value in attrs.items():
        text = str(value)
        parts.append(f"{key}={json.dumps(text) if (' ' in text or not text) else text}")
    return " ".join(parts)


class Exchange:
    """One HTTP request/response on a handler thread; knows when the client has gone."""

    def __init__(self, handler: BaseHTTPRequestHandler, stopping: threading.Event) -> None:
        self.handler = handler
        self.stopping = stopping
        self.status: int | None = None
        self.streaming = False
        self.dropped = False
        self.rule: Any = None  # a mid-stream failure rule for this reply, if any

    @property
    def sock(self) -> socket.socket:
        return self.handler.connection

    def peer_gone(self) -> bool:
        """True when the client closed its side (EOF readable) or the server is stopping."""
        if self.stopping.is_set():
            return True
        try:
            readable, _, _ = select.select([self.sock], [], [], 0)
            return bool(readable) and self.sock.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def wait_until(self, deadline: float) -> None:
        """Sleep until the monotonic `deadline`, raising ClientGone as soon as the client leaves."""
        while True:
            remaining = deadline - time.monotonic()
            if self.stopping.is_set():
                raise ClientGone("server stopping")
            if remaining <= 0:
                return
            try:
                readable, _, _ = select.select([self.sock], [], [], min(remaining, 0.1))
            except (OSError, ValueError) as exc:
                raise ClientGone(str(exc)) from exc
            if readable:
                try:
                    if self.sock.recv(1, socket.MSG_PEEK) == b"":
                        raise ClientGone("client closed the connection")
                except OSError as exc:
                    raise ClientGone(str(exc)) from exc
                # Pipelined bytes are not ours to read now; sleep the rest without polling.
                if self.stopping.wait(max(0.0, deadline - time.monotonic())):
                    raise ClientGone("server stopping")
                return

    def _send(self, data: bytes) -> None:
        try:
            self.handler.wfile.write(data)
            self.handler.wfile.flush()
        except OSError as exc:
            raise ClientGone(str(exc)) from exc

    def _headers(self, status: int, content_type: str, length: int | None,
                 extra: tuple[tuple[str, str], ...] = ()) -> bytes:
        reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
                  499: "Client Closed Request", 500: "Internal Server Error",
                  503: "Service Unavailable"}.get(status, "Status")
        date = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime())
        lines = [f"HTTP/1.1 {status} {reason}"]
        lines += [f"{name}: {value}" for name, value in extra]
        if content_type:  # Gin sends none for a bare status (the 200 of /api/delete)
            lines.append(f"Content-Type: {content_type}")
        lines.append(f"Date: {date}")
        lines.append(f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked")
        self.status = status
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    def send_body(self, status: int, body: bytes, content_type: str, head_only: bool = False,
                  extra: tuple[tuple[str, str], ...] = ()) -> None:
        """A complete reply with a Content-Length (content_type "" sends none; extra: more headers)."""
        self._send(self._headers(status, content_type, len(body), extra) + (b"" if head_only else body))

    def send_json(self, status: int, obj: Any, head_only: bool = False) -> None:
        """A `c.JSON` reply."""
        self.send_body(status, go_json(obj), "application/json; charset=utf-8", head_only)

    def send_error(self, status: int, message: str) -> None:
        """Ollama's error shape: `{"error": "..."}` with the given status."""
        self.send_json(status, {"error": message})

    def send_text(self, status: int, text: str, head_only: bool = False) -> None:
        """A `c.String` reply (text/plain)."""
        self.send_body(status, text.encode(), "text/plain; charset=utf-8", head_only)

    def stream_raw(self, line: bytes) -> None:
        """Write one NDJSON line as its own chunk, sending the stream's headers first if needed."""
        data = b""
        if not self.streaming:
            self.streaming = True
            data = self._headers(200, "application/x-ndjson", None)
        data += f"{len(line):x}\r\n".encode() + line + b"\r\n"
        self._send(data)

    def stream_line(self, obj: Any) -> None:
        """Write one JSON object as a stream line."""
        self.stream_raw(go_json(obj) + b"\n")

    def stream_error(self, message: str, status: int = 500) -> None:
        """An error in a stream: a JSON reply before any line, an in-band line after."""
        if self.streaming:
            self.stream_line({"error": message})
        else:
            self.send_error(status, message)

    def end_stream(self) -> None:
        """Terminate the chunked body."""
        if self.streaming:
            self._send(b"0\r\n\r\n")

    def drop(self) -> None:
        """Cut the connection without finishing the reply (as a crashed server would)."""
        self.dropped = True
        self.handler.close_connection = True
        try:
            self.handler.wfile.flush()
        except OSError:
            pass
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
