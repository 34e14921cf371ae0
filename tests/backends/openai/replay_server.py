"""A real HTTP/1.1 server on a free 127.0.0.1 port that answers with recorded replies, for the servers that cannot
run here (vLLM needs a GPU) and for what a real server never sends (a malformed event, a body that is not SSE).

Each reply is (status, content type, body parts); the parts of a 200 are sent chunked, one flush each, as
vLLM's uvicorn does with each `yield` of its stream generator. Every request's method, path, headers and body
are kept, so a test can check what the client sent (the Authorization header)."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Recorded:
    """One reply: status, content type and the body's parts (each flushed on its own)."""

    status: int
    content_type: str
    parts: Sequence[bytes]


def sse(events: Sequence[object]) -> Recorded:
    """A 200 text/event-stream reply: each event a `data: …` line and a blank line (str events as they are)."""
    return Recorded(200, "text/event-stream",
                    [f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n".encode() for e in events])


def json_reply(status: int, obj: object) -> Recorded:
    """A JSON reply in one part."""
    return Recorded(status, "application/json", [json.dumps(obj).encode()])


@dataclass
class Seen:
    """A request as it arrived."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class ReplayServer:
    """The running server: its base URL and the requests it saw."""

    base_url: str
    seen: list[Seen] = field(default_factory=list)


@contextmanager
def replay_server(route: Callable[[str, str], Recorded]) -> Iterator[ReplayServer]:
    """Serve `route(method, path)`'s reply to every request until the block ends."""
    seen: list[Seen] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass  # quiet: the test reads `seen`

        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            seen.append(Seen(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body))
            reply = route(self.command, self.path)
            self.send_response(reply.status)
            self.send_header("Content-Type", reply.content_type)
            if reply.status == 200 and reply.content_type == "text/event-stream":
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for part in reply.parts:
                    self.wfile.write(f"{len(part):x}\r\n".encode() + part + b"\r\n")
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
            else:
                data = b"".join(reply.parts)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            self.wfile.flush()

        do_GET = do_POST = _answer

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="replay-server", daemon=True)
    thread.start()
    try:
        yield ReplayServer(f"http://127.0.0.1:{server.server_address[1]}", seen)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
