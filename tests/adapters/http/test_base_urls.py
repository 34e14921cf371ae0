"""Base URLs through the streaming transport: a path prefix reaches the server, unusable URLs fail typed."""

from __future__ import annotations

import asyncio

import pytest

from app.adapters.http.errors import UnsupportedUrl
from app.adapters.http.streaming import HttpStreams
from tests.fakes.raw_http import chunk, read_request, serving

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n"


def test_a_base_url_path_goes_before_every_request_target() -> None:
    targets: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                head, _body = await read_request(reader)
            except asyncio.IncompleteReadError:
                return
            targets.append(head.split(b" ")[1])
            writer.write(HEAD + chunk(b'{"done":true}\n') + b"0\r\n\r\n")
            await writer.drain()

    async def go() -> list[bytes]:
        async with serving(handle) as url, HttpStreams(url + "/ollama/") as http:
            async with http.stream("POST", "/api/chat", b"{}") as lines:
                streamed = [line async for line, _t in lines]
            got: list[bytes] = []
            await http.request("POST", "/api/generate", b"{}", lambda line, _t: got.append(line))
            return streamed + got

    lines = asyncio.run(asyncio.wait_for(go(), 15))
    assert lines == [b'{"done":true}', b'{"done":true}']
    assert targets == [b"/ollama/api/chat", b"/ollama/api/generate"]


@pytest.mark.parametrize("url", ["http://127.0.0.1:99999", "http://127.0.0.1:abc", "http://127.0.0.1:0",
                                 "https://127.0.0.1:11434", "::::", "http://"])
def test_an_unusable_base_url_is_refused_as_such(url: str) -> None:
    with pytest.raises(UnsupportedUrl, match="plain http://"):
        HttpStreams(url)
