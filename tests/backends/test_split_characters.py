"""A character whose UTF-8 bytes arrive in two pieces (two HTTP chunks, two TCP writes) reaches the reply
whole, on both backends' streams: the real clients read a real socket whose server splits every
multibyte character of a Chinese answer between chunks."""

from __future__ import annotations

import asyncio
import json

import pytest

from app.backends.llama_server.client import LlamaServerClient
from app.backends.ollama.client import OllamaClient
from app.services.prompts import PromptRequest, stream_reply
from tests.fakes.llama_server.replay import events
from tests.fakes.raw_http import chunk, read_request, serving

PIECES = ("人工智能", "的发展", "趋势：", "大模型🙂", "越来越快。")
ANSWER = "".join(PIECES)


def _split_inside_characters(line: bytes) -> list[bytes]:
    """The line cut in the middle of each of its multibyte characters."""
    parts, start = [], 0
    for i in range(1, len(line)):
        if line[i] & 0xC0 == 0x80 and line[i - 1] & 0xC0 != 0x80:  # right after a character's first byte
            parts.append(line[start:i])
            start = i
    return [*parts, line[start:]]


def _handler(head: bytes, lines: list[bytes]):
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(head)
        for line in lines:
            for part in _split_inside_characters(line):
                writer.write(chunk(part))
                await writer.drain()  # each piece its own write
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        writer.close()
    return handle


def _ollama_lines() -> list[bytes]:
    lines = [json.dumps({"model": "qwen3:14b", "created_at": "2025-10-16T10:20:30Z",
                         "message": {"role": "assistant", "content": piece}, "done": False},
                        ensure_ascii=False).encode() + b"\n" for piece in PIECES]
    final = {"model": "qwen3:14b", "created_at": "2025-10-16T10:20:31Z", "message": {"role": "assistant",
             "content": ""}, "done": True, "done_reason": "stop", "total_duration": 2_000_000,
             "load_duration": 1_000, "prompt_eval_count": 12, "prompt_eval_duration": 100_000,
             "eval_count": len(PIECES), "eval_duration": 1_000_000}
    return [*lines, json.dumps(final).encode() + b"\n"]


def _llama_server_lines() -> list[bytes]:
    recorded = events("chat_think_off.sse")
    data = [json.loads(e[len(b"data: "):]) for e in recorded if e.startswith(b"data: {")]
    first, last = data[0], data[-1]
    texts = []
    for piece in PIECES:
        event = json.loads(json.dumps(data[1]))
        event["choices"][0]["delta"] = {"content": piece}
        texts.append(event)
    return [b"data: " + json.dumps(e, ensure_ascii=False).encode() + b"\n\n"
            for e in (first, *texts, last)] + [b"data: [DONE]\n\n"]


@pytest.mark.parametrize(("client", "content_type", "lines"), [
    (OllamaClient, "application/x-ndjson", _ollama_lines()),
    (LlamaServerClient, "text/event-stream", _llama_server_lines()),
])
def test_characters_split_between_chunks_arrive_whole(client, content_type: str, lines: list[bytes]) -> None:
    assert any(len(_split_inside_characters(line)) > 1 for line in lines)  # the server does split characters
    head = (f"HTTP/1.1 200 OK\r\nContent-Type: {content_type}; charset=utf-8\r\n"
            "Transfer-Encoding: chunked\r\n\r\n").encode()

    async def go():
        async with serving(_handler(head, lines)) as url, client(url) as c:
            return await asyncio.wait_for(stream_reply(c, PromptRequest(model="m", prompt="写一段话")), 15)

    outcome = asyncio.run(go())
    assert outcome.error is None, outcome.error
    assert outcome.content == ANSWER and "\ufffd" not in outcome.content
