"""How a streamed reply ends, told by what the transport saw: a real socket server replays the bytes the real
Ollama 0.32.15 sent for one streamed chat (tests/data/ollama/real/chat_stream.http) whole, then without its final
`done: true` record but with a proper end of the chunked body (as Ollama 0.32.15 ends some replies), then cut off
in the middle of a chunk (a connection that drops). The first is a reply, the second ReplyUnfinished ("the server
ended the reply without its final record, after 8 tokens"), the third StreamDropped ("connection dropped"), on the
console's path, the load generator's path and in the load generator's records."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import pytest

from app.backends.ollama.client import OllamaClient, load_client
from app.core.bench.outcome import ERROR_WORDS, REQUEST_FAILURES, FailureKind
from app.core.bench.workload import BenchPrompt, LoadPlan
from app.core.errors import DeckError, ReplyUnfinished, StreamDropped
from app.core.replies import ChatRequest, StreamChunk
from app.services.bench.loadgen import LoadGenerator
from tests.bounded import run_within
from tests.fakes.raw_http import read_request, serving

T = TypeVar("T")
RECORDED = Path(__file__).parents[2] / "data" / "ollama" / "real" / "chat_stream.http"
HI = [{"role": "user", "content": "Say hello."}]


def recorded() -> tuple[bytes, list[bytes]]:
    """The recorded reply's head (status line and headers, with the blank line) and each chunk's payload, in order."""
    raw = RECORDED.read_bytes()
    head, _, body = raw.partition(b"\r\n\r\n")
    chunks = []
    while body:
        size_line, _, body = body.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            break
        chunks.append(body[:size])
        assert body[size:size + 2] == b"\r\n", "a chunk as Go frames it: its size, its bytes, CRLF"
        body = body[size + 2:]
    return head + b"\r\n\r\n", chunks


def frame(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


def replaying(ending: str) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]:
    """A connection handler answering every request with the recorded reply, ended as `ending` says:
    "whole" as recorded; "unfinished" without the final record's chunk but with the chunked body's terminator
    (the connection stays open for the next request); "mid_chunk" with half of the fourth chunk, then closed."""
    head, chunks = recorded()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    await read_request(reader)
                except asyncio.IncompleteReadError:
                    return
                writer.write(head)
                if ending == "mid_chunk":
                    for payload in chunks[:3]:
                        writer.write(frame(payload))
                    writer.write(frame(chunks[3])[: len(chunks[3]) // 2])
                    await writer.drain()
                    return  # closes the socket in the middle of a chunk
                sent = chunks if ending == "whole" else [c for c in chunks if not json.loads(c)["done"]]
                for payload in sent:
                    writer.write(frame(payload))
                    await writer.drain()
                writer.write(b"0\r\n\r\n")
                await writer.drain()
        finally:
            writer.close()

    return handle


def run(make: Callable[[], Awaitable[T]]) -> T:
    return run_within(make, 30)


def test_the_recording_is_a_real_stream_of_records_ending_with_done() -> None:
    head, chunks = recorded()
    assert head.startswith(b"HTTP/1.1 200 OK\r\n") and b"Transfer-Encoding: chunked" in head
    records = [json.loads(c) for c in chunks]
    assert [r["done"] for r in records] == [False] * 8 + [True]
    assert records[-1]["done_reason"] == "length" and records[-1]["eval_count"] == 8


async def _console(url: str) -> tuple[list[StreamChunk], BaseException | None]:
    got: list[StreamChunk] = []
    async with OllamaClient(url) as client:
        try:
            async for chunk in client.chat("smollm2", HI, options={"num_predict": 8}):
                got.append(chunk)
        except DeckError as exc:
            return got, exc
    return got, None


async def _load_path(url: str) -> tuple[list[StreamChunk], BaseException | None]:
    got: list[StreamChunk] = []
    async with OllamaClient(url) as client:
        try:
            await client.stream_chat(ChatRequest("smollm2", tuple(HI), max_tokens=8), got.append)
        except DeckError as exc:
            return got, exc
    return got, None


@pytest.mark.parametrize("path", [_console, _load_path], ids=["console", "load"])
def test_a_whole_reply_is_a_reply(path: Callable[[str], Awaitable[tuple[list[StreamChunk], BaseException | None]]]
                                  ) -> None:
    async def go() -> tuple[list[StreamChunk], BaseException | None]:
        async with serving(replaying("whole")) as url:
            return await path(url)

    got, error = run(go)
    assert error is None and got[-1].done and got[-1].final is not None and got[-1].final.output_tokens == 8


@pytest.mark.parametrize("path", [_console, _load_path], ids=["console", "load"])
def test_a_reply_ended_properly_without_its_final_record_is_unfinished_not_dropped(
        path: Callable[[str], Awaitable[tuple[list[StreamChunk], BaseException | None]]]) -> None:
    async def go() -> tuple[list[StreamChunk], BaseException | None]:
        async with serving(replaying("unfinished")) as url:
            return await path(url)

    got, error = run(go)
    assert isinstance(error, ReplyUnfinished) and not isinstance(error, StreamDropped)
    assert "ended the reply without its final record" in error.message
    assert len(got) == 8 and not any(c.done for c in got)


@pytest.mark.parametrize("path", [_console, _load_path], ids=["console", "load"])
def test_a_connection_closed_mid_chunk_is_dropped(
        path: Callable[[str], Awaitable[tuple[list[StreamChunk], BaseException | None]]]) -> None:
    async def go() -> tuple[list[StreamChunk], BaseException | None]:
        async with serving(replaying("mid_chunk")) as url:
            return await path(url)

    got, error = run(go)
    assert isinstance(error, StreamDropped) and not isinstance(error, ReplyUnfinished)
    assert "closed before the reply was complete" in error.message
    assert len(got) == 3


def _measure(ending: str) -> list:
    plan = LoadPlan(model="smollm2", prompts=(BenchPrompt("hello", "Say hello."),), requests=2, warmup_requests=0,
                    num_predict=8, think=False)

    async def go() -> list:
        async with serving(replaying(ending)) as url, LoadGenerator(url, load_client) as generator:
            return list((await generator.run(plan)).records)

    return run(go)


def test_the_load_generator_names_each_ending_as_what_the_transport_saw() -> None:
    unfinished = _measure("unfinished")
    assert [r.error_kind for r in unfinished] == ["unfinished", "unfinished"]
    assert unfinished[0].error == "the server ended the reply without its final record, after 8 tokens"
    assert unfinished[0].output_tokens == 8 and unfinished[0].first_token_s is not None
    assert REQUEST_FAILURES["unfinished"] is FailureKind.UNFINISHED
    dropped = _measure("mid_chunk")
    assert [r.error_kind for r in dropped] == ["dropped", "dropped"] and ERROR_WORDS["dropped"] == "connection dropped"
    assert all(r.ok for r in _measure("whole"))
