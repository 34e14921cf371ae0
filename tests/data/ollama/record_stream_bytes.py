"""Records the bytes of one streamed reply from the real Ollama 0.32.15 exactly as they came off the socket
(status line, headers, chunk framing, each NDJSON record), for the tests that replay a reply cut at a record
(tests/backends/ollama/test_reply_endings.py).

    PYTHONPATH=$PWD python tests/data/ollama/record_stream_bytes.py [LAYOUT]   # about half a minute on 2 cores

LAYOUT is where the kit is laid out (default: a temporary folder); the kit comes from ../shared/ollama or
$DECK_OLLAMA_KIT, as for record.py.
Writes real/chat_stream.http: the raw reply to a streamed /api/chat of `smollm2` (the bundled SmolLM2-135M) with
8 output tokens, seed 1 and temperature 0, the request's own bytes in real/chat_stream.request."""

from __future__ import annotations

import json
import socket
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))

from tests.ollama_real_fixtures import MODEL_NAME, RealOllama, lay_out_kit  # noqa: E402

OUT = HERE / "real"
CHAT = {"model": MODEL_NAME, "messages": [{"role": "user", "content": "Say hello."}],
        "options": {"num_predict": 8, "seed": 1, "temperature": 0}, "stream": True}


def raw_reply(port: int, request: bytes, timeout_s: float = 300.0) -> bytes:
    """Every byte the server sends back to `request` until its chunked body's terminator (or it closes)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as sock:
        sock.sendall(request)
        got = b""
        deadline = time.monotonic() + timeout_s
        while not got.endswith(b"\r\n0\r\n\r\n") and time.monotonic() < deadline:
            block = sock.recv(65536)
            if not block:
                break
            got += block
    return got


def main() -> int:
    """Record one streamed chat into real/; 1 with the reason when the kit cannot be laid out."""
    with tempfile.TemporaryDirectory(prefix="ollama-bytes-") as tmp:
        kit = lay_out_kit(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tmp) / "kit")
        if isinstance(kit, str):
            print(kit, file=sys.stderr)
            return 1
        server = RealOllama(kit, Path(tmp) / "serve", Path(tmp) / "serve" / "models").start()
        try:
            server.create_model()
            body = json.dumps(CHAT).encode()
            request = (f"POST /api/chat HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nUser-Agent: ollama-deck\r\n"
                       "Accept: application/x-ndjson\r\nContent-Type: application/json\r\n"
                       f"Content-Length: {len(body)}\r\n\r\n").encode() + body
            raw_reply(server.port, request)  # the first one loads the model; the one kept is a warm reply
            reply = raw_reply(server.port, request)
        finally:
            server.stop()
    OUT.mkdir(exist_ok=True)
    (OUT / "chat_stream.request").write_bytes(request.replace(f"127.0.0.1:{server.port}".encode(), b"$HOST"))
    (OUT / "chat_stream.http").write_bytes(reply)
    print(f"wrote {len(reply)} bytes to {OUT / 'chat_stream.http'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
