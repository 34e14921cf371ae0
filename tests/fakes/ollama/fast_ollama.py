"""A minimal asyncio NDJSON streamer that answers `/api/chat` and `/api/generate` as Ollama does,
as fast as one process can, for measuring the load generator itself.

The threaded stand-in (fake_ollama.FakeOllama) models Ollama's scheduler faithfully but spends
a thread and a select() per token, so it cannot stream tens of thousands of lines a second.
This one keeps only the wire: HTTP/1.1 keep-alive, chunked `application/x-ndjson`, one JSON
object per chunk with Ollama's fields (`model`, `created_at` with nanoseconds, `message` or
`response`, `done`) and Ollama's final line (`done_reason`, `total_duration`, `load_duration`,
`prompt_eval_count`, `prompt_eval_duration`, `eval_count`, `eval_duration`). It has no queue:
every request streams at once.

Pacing: `--tokens-per-s 0` streams flat out; a positive rate sends token i of a reply at
start + i / rate (drift-free), so a client's receive stamps can be compared with each line's
`created_at` (the server's wall clock when it wrote the line).

    python -m tests.fakes.ollama.fast_ollama --port 0 [--tokens-per-s 160] [--tokens 256]
prints `listening <port>` once it accepts connections, and serves until stdin closes or SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import time

from tests.fakes.ollama.recorded import real_version

DEFAULT_TOKENS = 128
VERSION = real_version()  # the real server's, as recorded (tests/data/ollama/real/exchanges.json)
WORDS = [" local", " inference", " is", " bound", " by", " memory", " bandwidth", "."]


def created_at(ns: int) -> bytes:
    """RFC 3339 UTC with trimmed nanoseconds, as Go marshals time.Now().UTC()."""
    secs, frac = divmod(ns, 1_000_000_000)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs))
    digits = f"{frac:09d}".rstrip("0")
    return f"{stamp}.{digits}Z".encode() if digits else f"{stamp}Z".encode()


def parse_created_at_ns(text: str) -> int:
    """Nanoseconds since the epoch from a `created_at` written by created_at()."""
    base, _, frac = text.rstrip("Z").partition(".")
    secs = int(time.mktime(time.strptime(base, "%Y-%m-%dT%H:%M:%S")) - time.timezone)
    return secs * 1_000_000_000 + int((frac or "0").ljust(9, "0")[:9])


class Streamer:
    """Serves Ollama's streaming endpoints; counts the lines it wrote."""

    def __init__(self, tokens_per_s: float = 0.0, tokens: int = DEFAULT_TOKENS) -> None:
        self.tokens_per_s = tokens_per_s
        self.tokens = tokens
        self.lines_sent = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One keep-alive connection: requests one after the other."""
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                request_line, *header_lines = head.decode("latin-1").split("\r\n")
                method, path, _ = request_line.split(" ", 2)
                length = 0
                for line in header_lines:
                    name, _, value = line.partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value.strip())
                body = await reader.readexactly(length) if length else b""
                await self._route(method, path, body, writer)
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError, asyncio.CancelledError):
            pass  # the client left, or the server is shutting down
        finally:
            writer.close()

    async def _route(self, method: str, path: str, body: bytes, writer: asyncio.StreamWriter) -> None:
        if path == "/":
            self._reply(writer, 200, b"Ollama is running", b"text/plain; charset=utf-8")
        elif path == "/api/version":
            self._reply(writer, 200, json.dumps({"version": VERSION}).encode(), b"application/json; charset=utf-8")
        elif path in ("/api/chat", "/api/generate") and method == "POST":
            await self._stream(json.loads(body or b"{}"), path.endswith("chat"), writer)
        else:
            self._reply(writer, 404, b"404 page not found", b"text/plain")
        await writer.drain()

    @staticmethod
    def _reply(writer: asyncio.StreamWriter, status: int, body: bytes, content_type: bytes) -> None:
        reason = b"OK" if status == 200 else b"Not Found"
        writer.write(b"HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n%s"
                     % (status, reason, content_type, len(body), body))

    async def _stream(self, request: dict, is_chat: bool, writer: asyncio.StreamWriter) -> None:
        started = time.monotonic()
        model = json.dumps(request.get("model", "")).encode()
        options = request.get("options") or {}
        count = int(options.get("num_predict") or self.tokens)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n")
        if is_chat:
            head = b'{"model":' + model + b',"created_at":"'
            middle = b'","message":{"role":"assistant","content":'
            tail = b'},"done":false}\n'
        else:
            head = b'{"model":' + model + b',"created_at":"'
            middle = b'","response":'
            tail = b',"done":false}\n'
        words = [json.dumps(w).encode() for w in WORDS]
        interval = 1.0 / self.tokens_per_s if self.tokens_per_s > 0 else 0.0
        decode_start = time.monotonic()
        for i in range(count):
            if interval:
                delay = decode_start + (i + 1) * interval - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
            line = head + created_at(time.time_ns()) + middle + words[i % len(words)] + tail
            writer.write(b"%x\r\n%s\r\n" % (len(line), line))
            self.lines_sent += 1
            if not interval or writer.transport.get_write_buffer_size() > 65536:
                await writer.drain()
                await asyncio.sleep(0)  # let every stream take its turn
        end = time.monotonic()
        final = {"model": request.get("model", ""), "created_at": created_at(time.time_ns()).decode()}
        final.update({"message": {"role": "assistant", "content": ""}} if is_chat else {"response": ""})
        final.update({"done": True, "done_reason": "length" if options.get("num_predict") else "stop",
                      "total_duration": int((end - started) * 1e9), "load_duration": 1_000,
                      "prompt_eval_count": 12, "prompt_eval_duration": 1_000,
                      "eval_count": count, "eval_duration": max(1, int((end - decode_start) * 1e9))})
        line = json.dumps(final, separators=(",", ":")).encode() + b"\n"
        writer.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(line), line))
        self.lines_sent += 1


async def serve(port: int, streamer: Streamer) -> None:
    """Serve until stdin closes or SIGTERM/SIGINT."""
    server = await asyncio.start_server(streamer.handle, "127.0.0.1", port, backlog=512)
    print(f"listening {server.sockets[0].getsockname()[1]}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    loop.add_reader(sys.stdin.fileno(), lambda: stop.set() if not sys.stdin.buffer.read1(1) else None)
    async with server:
        await stop.wait()
    print(f"lines {streamer.lines_sent}", flush=True)


def main(argv: list[str] | None = None) -> int:
    """Entry point: parse options and serve."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--tokens-per-s", type=float, default=0.0, help="per stream; 0 = as fast as possible")
    p.add_argument("--tokens", type=int, default=DEFAULT_TOKENS, help="tokens per reply without num_predict")
    args = p.parse_args(argv)
    asyncio.run(serve(args.port, Streamer(args.tokens_per_s, args.tokens)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
