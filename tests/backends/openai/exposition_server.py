"""A real loopback HTTP server answering GET /metrics with what a test sets (an exposition file's
bytes, or a status and body), recording each request's head: for the telemetry reader's HTTP path.
It replays the expositions of tests/data/openai/ (written from the servers' sources, see the README
there), since vLLM, SGLang and TGI cannot run here."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from app.backends.openai.metrics import OpenAiTelemetry
from app.core.ports.telemetry import ServerTelemetry
from app.core.server_telemetry import ServerSample
from tests.fakes.raw_http import serving

DATA = Path(__file__).resolve().parents[2] / "data"


def served(name: str) -> bytes:
    """The bytes of tests/data/`name` (an exposition of tests/data/openai/ or a llama-server recording)."""
    return (DATA / name).read_bytes()


@dataclass
class Exposer:
    """What the server answers now, and the request heads it saw."""

    answers: dict[str, tuple[int, bytes]] = field(default_factory=dict)  # by path; 404 for any other
    content_type: str = "text/plain; version=0.0.4; charset=utf-8"
    heads: list[str] = field(default_factory=list)
    url: str = ""

    def answer(self, body: bytes | str, status: int = 200, path: str = "/metrics") -> None:
        """Answer GET `path` with `body` and `status` from the next request on."""
        self.answers[path] = (status, body.encode() if isinstance(body, str) else body)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:  # keep-alive: the reader's pooled connection sends several requests
                head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
                self.heads.append(head)
                status, body = self.answers.get(head.split(" ")[1], (404, b"Not Found"))
                writer.write(b"HTTP/1.1 %d X\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n%s"
                             % (status, self.content_type.encode(), len(body), body))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    def header(self, name: str) -> list[str]:
        """The values of header `name` in the requests seen, in order."""
        found = []
        for head in self.heads:
            for line in head.split("\r\n")[1:]:
                key, _, value = line.partition(":")
                if key.strip().lower() == name.lower():
                    found.append(value.strip())
        return found

    def paths(self) -> list[str]:
        """The request lines' paths, in order."""
        return [head.split(" ")[1] for head in self.heads]


@contextlib.asynccontextmanager
async def exposer() -> AsyncIterator[Exposer]:
    """A running Exposer on a free 127.0.0.1 port (its URL in `.url`)."""
    server = Exposer()
    async with serving(server.handle) as url:
        server.url = url
        yield server


async def scrape(telemetry: ServerTelemetry) -> ServerSample:
    """One sample of `telemetry`, its connection closed after (whatever happened)."""
    try:
        return await telemetry.sample()
    finally:
        await telemetry.aclose()


def serve_and_scrape(answers: Mapping[str, tuple[int, bytes | str]], suffix: str = "",
                     headers: Mapping[str, str] | None = None) -> tuple[ServerSample, Exposer]:
    """Serve `answers` (by path) and take one sample through OpenAiTelemetry(the server's URL + `suffix`)."""
    async def go() -> tuple[ServerSample, Exposer]:
        async with exposer() as server:
            for path, (status, body) in answers.items():
                server.answer(body, status, path)
            return await scrape(OpenAiTelemetry(server.url + suffix, headers=headers)), server
    return asyncio.run(go())


__all__ = ["DATA", "Exposer", "exposer", "scrape", "serve_and_scrape", "served"]
