"""A loopback HTTP server that answers what the real llama-server was recorded answering.

The recordings are tests/data/llama_server/ (record_chat.py made them from the real server). GET
/props, /v1/models and /health return their recorded bodies; POST /v1/chat/completions returns the
reply a test picked: a recorded SSE stream sent event by event as chunked transfer (as
llama-server sends it), optionally cut after N events by closing the socket (a server that dies
mid-reply), or a recorded error body with its status. Where it must differ from the real server:
it generates nothing, so every chat gets the same recorded reply whatever was asked.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.fakes.raw_http import chunk, serving

DATA = Path(__file__).resolve().parents[2] / "data" / "llama_server"
INDEX: dict[str, Any] = json.loads((DATA / "index.json").read_text())
REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 500: "Internal Server Error", 503: "Service Unavailable"}


def recorded(name: str) -> bytes:
    """A recording's body bytes."""
    return (DATA / name).read_bytes()


def events(name: str) -> list[bytes]:
    """A recorded SSE stream split into its events (each with its blank-line end)."""
    return [e + b"\n\n" for e in recorded(name).split(b"\n\n") if e.strip()]


@dataclass
class Replay:
    """What the replay server answers next, and what it was asked."""

    chat: str = "chat_think_off.sse"  # recording answered to POST /v1/chat/completions
    cut_after: int | None = None  # close the socket after this many events
    props: str = "props.json"
    model_path: str | None = None  # the served file, in place of the recorded one (props and models)
    bodies: list[dict[str, Any]] = field(default_factory=list)  # chat request bodies, in order
    heads: list[bytes] = field(default_factory=list)  # chat request heads, in order
    connections: int = 0  # connections accepted


def _head(status: int, kind: str, extra: str = "") -> bytes:
    return (f"HTTP/1.1 {status} {REASONS.get(status, 'Status')}\r\nServer: llama.cpp\r\n"
            f"Content-Type: {kind}\r\n{extra}\r\n").encode()


async def _answer(replay: Replay, writer: asyncio.StreamWriter, head: bytes, body: bytes) -> bool:
    """Write one reply; False when the connection must close."""
    line = head.split(b"\r\n", 1)[0].decode()
    method, target = line.split(" ")[:2]
    if method == "GET":
        name = {"/props": replay.props, "/v1/models": "models.json", "/health": "health_ready.json"}.get(target)
        if name is None:
            data = b'{"error":{"code":404,"message":"File Not Found","type":"not_found_error"}}'
            writer.write(_head(404, "application/json; charset=utf-8", f"Content-Length: {len(data)}\r\n") + data)
            return True
        data = recorded(name)
        if replay.model_path is not None:
            data = data.replace(json.dumps(json.loads(recorded("props.json"))["model_path"])[1:-1].encode(),
                                json.dumps(replay.model_path)[1:-1].encode())
        writer.write(_head(INDEX[name]["status"], INDEX[name]["content_type"], f"Content-Length: {len(data)}\r\n")
                     + data)
        return True
    replay.bodies.append(json.loads(body))
    replay.heads.append(head)
    entry = INDEX[replay.chat]
    if entry["status"] != 200:
        data = recorded(replay.chat)
        writer.write(_head(entry["status"], entry["content_type"],
                           f"Content-Length: {len(data)}\r\nConnection: close\r\n") + data)
        return False
    writer.write(_head(200, "text/event-stream", "Transfer-Encoding: chunked\r\n"))
    for i, event in enumerate(events(replay.chat)):
        if replay.cut_after is not None and i >= replay.cut_after:
            await writer.drain()
            return False
        writer.write(chunk(event))
        await writer.drain()
    writer.write(b"0\r\n\r\n")
    return True


async def _read(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    """One request: (head, body); a GET has no Content-Length."""
    head = await reader.readuntil(b"\r\n\r\n")
    if b"content-length:" not in head.lower():
        return head, b""
    length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
    return head, await reader.readexactly(length)


@contextlib.asynccontextmanager
async def replaying(replay: Replay) -> AsyncIterator[str]:
    """Serve `replay` on a loopback port; yields its http:// URL."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        replay.connections += 1
        try:
            while True:
                head, body = await _read(reader)
                if not await _answer(replay, writer, head, body):
                    break
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, IndexError):
            pass
        finally:
            writer.close()

    async with serving(handle) as url:
        yield url


__all__ = ["DATA", "INDEX", "Replay", "events", "recorded", "replaying"]
