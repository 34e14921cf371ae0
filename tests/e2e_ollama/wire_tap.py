"""A TCP relay between the app and a real server that keeps what the server sent, so a test can compare
the app's figures with the server's own final record rather than with the app's reading of it."""

from __future__ import annotations

import json
import socket
import threading
from typing import Any


class WireTap:
    """Listens on a free 127.0.0.1 port and relays each connection to (host, port), keeping the bytes
    the server sent on each one; close() ends it."""

    def __init__(self, port: int, host: str = "127.0.0.1") -> None:
        self._target = (host, port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self.replies: list[bytearray] = []
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        threading.Thread(target=self._accept, name=f"wire-tap-{self.port}", daemon=True).start()

    @property
    def url(self) -> str:
        """The relay's http://127.0.0.1:PORT, to give the app instead of the server's."""
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            server = socket.create_connection(self._target)
            kept = bytearray()
            with self._lock:
                self.replies.append(kept)
            for source, sink, into in ((client, server, None), (server, client, kept)):
                thread = threading.Thread(target=self._pump, args=(source, sink, into), daemon=True)
                thread.start()
                self._threads.append(thread)

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket, into: bytearray | None) -> None:
        try:
            while data := source.recv(65536):
                if into is not None:
                    into.extend(data)
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (sink, source):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        """Stop accepting (relayed connections end when either side closes)."""
        self._listener.close()

    def json_lines(self, *, streamed_only: bool = False) -> list[dict[str, Any]]:
        """Every JSON object the server sent, in order, over all connections (HTTP chunking undone);
        streamed_only: only those of streamed replies (bodies of more than one object)."""
        with self._lock:
            replies = [bytes(r) for r in self.replies]
        found = []
        for reply in replies:
            for body in _bodies(reply):
                objects = [json.loads(line) for line in body.splitlines() if line.strip().startswith(b"{")]
                if not streamed_only or len(objects) > 1:
                    found.extend(objects)
        return found


def _bodies(stream: bytes) -> list[bytes]:
    """The bodies of the HTTP/1.1 responses in `stream` (Content-Length or chunked)."""
    bodies = []
    rest = stream
    while rest:
        head, sep, rest = rest.partition(b"\r\n\r\n")
        if not sep:
            break
        headers = {k.strip().lower(): v.strip() for k, _, v in
                   (line.partition(b":") for line in head.split(b"\r\n")[1:])}
        if headers.get(b"transfer-encoding") == b"chunked":
            body = bytearray()
            while True:
                size_line, _, rest = rest.partition(b"\r\n")
                size = int(size_line.split(b";")[0], 16)
                if size == 0:
                    _, _, rest = rest.partition(b"\r\n")
                    break
                body += rest[:size]
                rest = rest[size + 2:]
            bodies.append(bytes(body))
        else:
            length = int(headers.get(b"content-length", b"0"))
            bodies.append(rest[:length])
            rest = rest[length:]
    return bodies
