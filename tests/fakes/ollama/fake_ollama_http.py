"""HTTP side of the stand-in Ollama server: routing as Gin does it, request records and the
failure rules set by `fail_next`, as a mixin of FakeOllama."""

from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from collections.abc import Callable
from urllib.parse import urlsplit

from tests.fakes.ollama.fake_ollama_infer import ClientGone, Refused, handle_inference
from tests.fakes.ollama.fake_ollama_sched import QUEUE_FULL_MESSAGE
from tests.fakes.ollama.fake_ollama_store import (handle_create, handle_delete, handle_pull, ps_reply,
                                           show_reply, tags_reply)
from tests.fakes.ollama.fake_ollama_wire import Exchange, gin_log_line, slog_line

# Not recorded: the recording machine has no GPU to run out of. This is the CUDA text of Ollama's own
# runner (before 0.30); from 0.30 llama.cpp's fit moves layers to the CPU instead, and a host that runs
# out of RAM gets "llama-server process has terminated: signal: killed" (seen on the H200 machine).
OOM_MESSAGE = "llama runner process has terminated: cudaMalloc failed: out of memory"
FAIL_STATUS = {"not_found": 404, "oom": 500, "server_error": 500, "queue_full": 503, "bad_request": 400}
FAIL_DEFAULT_TEXT = {
    "oom": OOM_MESSAGE,
    "server_error": "llama runner process has terminated: exit status 2",
    "queue_full": QUEUE_FULL_MESSAGE,
    "bad_request": "missing request body",
    "midstream_error": "an error was encountered while running the model: unexpected EOF",
    "malformed": "<html><body><h1>502 Bad Gateway</h1></body></html>",
    "drop": "",
    "unfinished": "",
}
ROUTES = {"/": ("GET", "HEAD"), "/api/version": ("GET", "HEAD"), "/api/tags": ("GET", "HEAD"),
          "/api/ps": ("GET",), "/api/show": ("POST",), "/api/chat": ("POST",),
          "/api/generate": ("POST",), "/api/pull": ("POST",), "/api/create": ("POST",),
          "/api/delete": ("DELETE",)}


@dataclass
class RecordedRequest:
    """One request as the fake received it; `finished` is set once it has been answered."""

    method: str
    path: str
    json: Any
    time: float
    headers: dict[str, str] = field(default_factory=dict)
    status: int | None = None
    outcome: str = "pending"  # ok | refused | client_gone | dropped | error
    finished: threading.Event = field(default_factory=threading.Event, repr=False, compare=False)


@dataclass
class FailRule:
    """One armed failure: what to do, on which path, after how many chunks, how many times."""

    kind: str
    path: str | None
    after_chunks: int
    message: str
    count: int

    def matches(self, path: str) -> bool:
        if self.path is not None:
            return self.path == path
        return path.startswith("/api/") and path != "/api/version"


class HttpMixin:
    """Request handling; FakeOllama provides the state declared here."""

    version: str
    requests: list[RecordedRequest]
    _rules: list[FailRule]
    _lock: threading.RLock
    _stopping: threading.Event
    _sockets: set[socket.socket]
    log: Callable[[str], None]

    def fail_next(self, kind: str, *, path: str | None = None, after_chunks: int = 0,
                  message: str | None = None, count: int = 1) -> None:
        """Make the next `count` matching requests fail as `kind` (path None: any /api/ call but version)."""
        if kind not in FAIL_STATUS and kind not in FAIL_DEFAULT_TEXT:
            raise ValueError(f"unknown failure kind {kind!r}")
        with self._lock:
            self._rules.append(FailRule(kind, path, after_chunks, message or "", count))

    def _take_rule(self, path: str) -> FailRule | None:
        with self._lock:
            for rule in self._rules:
                if rule.matches(path):
                    rule.count -= 1
                    if rule.count <= 0:
                        self._rules.remove(rule)
                    return rule
        return None

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                # Go's net package turns Nagle off on every TCP connection, so Ollama's stream lines
                # leave at once; without this a kept-alive connection stalls ~40 ms on delayed ACKs.
                try:
                    self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                except OSError:
                    pass
                with fake._lock:
                    fake._sockets.add(self.connection)

            def finish(self) -> None:
                try:
                    super().finish()
                except OSError:
                    pass
                with fake._lock:
                    fake._sockets.discard(self.connection)

            def do_GET(self) -> None:
                fake._dispatch(self, "GET")

            def do_HEAD(self) -> None:
                fake._dispatch(self, "HEAD")

            def do_POST(self) -> None:
                fake._dispatch(self, "POST")

            def do_DELETE(self) -> None:
                fake._dispatch(self, "DELETE")

            def log_message(self, format: str, *args: Any) -> None:
                pass  # the fake logs Gin-style lines through on_log instead

        return Handler

    def _dispatch(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        started = time.monotonic_ns()
        path = urlsplit(handler.path).path
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        body: Any = None
        parse_error = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError as exc:
                # Go's decoder: a body cut short is "unexpected EOF" (recorded), anything else names the character.
                cut_short = isinstance(exc, json.JSONDecodeError) and exc.pos >= len(raw.rstrip())
                parse_error = "unexpected EOF" if cut_short else (
                    f"invalid character '{raw[:1].decode(errors='replace')}' looking for beginning of value")
        record = RecordedRequest(method, path, body, time.monotonic(), dict(handler.headers.items()))
        with self._lock:
            self.requests.append(record)
        ex = Exchange(handler, self._stopping)
        try:
            self._route(ex, method, path, raw, body, parse_error)
            record.outcome = "dropped" if ex.dropped else "ok"
        except Refused as refused:
            ex.send_error(refused.status, refused.message)
            record.outcome = "refused"
        except ClientGone:
            record.outcome = "client_gone"
            handler.close_connection = True
        except Exception as exc:  # a bug in the fake must still answer like a server would
            record.outcome = "error"
            self.log(slog_line("ERROR", "routes.go:0", "fake server failure", error=repr(exc)))
            try:
                ex.stream_error(str(exc)) if ex.streaming else ex.send_error(500, str(exc))
            except ClientGone:
                pass
        finally:
            record.status = ex.status if ex.status is not None else 499
            client_ip = handler.client_address[0] if handler.client_address else ""
            self.log(gin_log_line(record.status, time.monotonic_ns() - started, client_ip, method, path))
            record.finished.set()

    def _route(self, ex: Exchange, method: str, path: str, raw: bytes, body: Any, parse_error: str | None) -> None:
        allowed = ROUTES.get(path)
        # Gin's own 404 and 405 replies: plain text without a charset (recorded from 0.32.15).
        if allowed is None:
            ex.send_body(404, b"404 page not found", "text/plain")
            return
        if method not in allowed:
            ex.send_body(405, b"405 method not allowed", "text/plain", extra=(("Allow", ", ".join(allowed)),))
            return
        head = method == "HEAD"
        if path == "/":
            ex.send_text(200, "Ollama is running", head_only=head)
            return
        if path == "/api/version":
            ex.send_json(200, {"version": self.version}, head_only=head)
            return
        rule = self._take_rule(path)
        if rule is not None and rule.kind in FAIL_STATUS:
            model = (body or {}).get("model", "") if isinstance(body, dict) else ""
            text = rule.message or FAIL_DEFAULT_TEXT.get(rule.kind) or f"model '{model}' not found"
            if rule.kind == "oom":
                self.log(slog_line("ERROR", "sched.go:489", "error loading llama server", error=text))
            raise Refused(FAIL_STATUS[rule.kind], text)
        if rule is not None:
            rule.message = rule.message or FAIL_DEFAULT_TEXT[rule.kind]
        if path == "/api/tags":
            self._reply_or_fail(ex, rule, lambda: tags_reply(self), head)
            return
        if path == "/api/ps":
            self._reply_or_fail(ex, rule, lambda: ps_reply(self), head)
            return
        if parse_error:
            raise Refused(400, parse_error)
        if not raw:
            raise Refused(400, "missing request body")
        if not isinstance(body, dict):
            raise Refused(400, f"json: cannot unmarshal {type(body).__name__} into Go value of type api.Request")
        if path in ("/api/chat", "/api/generate"):
            ex.rule = rule
            handle_inference(self, ex, body, path.rsplit("/", 1)[1])
        elif rule is not None:
            self._reply_or_fail(ex, rule, lambda: {}, False)
        elif path == "/api/show":
            ex.send_json(200, show_reply(self, body))
        elif path == "/api/pull":
            handle_pull(self, ex, body)
        elif path == "/api/create":
            handle_create(self, ex, body)
        elif path == "/api/delete":
            handle_delete(self, ex, body)

    @staticmethod
    def _reply_or_fail(ex: Exchange, rule: FailRule | None, reply: Callable[[], Any], head: bool) -> None:
        if rule is None:
            ex.send_json(200, reply(), head_only=head)
        elif rule.kind == "drop":
            ex.drop()
        elif rule.kind == "malformed":
            ex.send_body(200, rule.message.encode(), "application/json; charset=utf-8")
        else:
            ex.stream_line({"error": rule.message})
            ex.end_stream()
