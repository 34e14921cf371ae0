"""LlamaServerClient over real sockets against a server replaying the real llama-server's replies."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

from app.backends.llama_server import probe
from app.backends.llama_server.client import LlamaServerClient, load_client
from app.core.errors import (BadRequest, ContextExceeded, DeckError, ModelNotFound, ServerUnreachable, ServerError, ServerFault,
                             StreamDropped)
from app.core.replies import ChatRequest, StreamChunk
from app.core.models import ModelDetails
from tests.fakes.llama_server.replay import Replay, recorded, replaying
from tests.fakes.llama_server.tiny_gguf import N_LAYER, write_tiny_gguf
from tests.fakes.raw_http import closed_port
from tests.bounded import run_within

HI = [{"role": "user", "content": "hi"}]
PROPS = json.loads(recorded("props.json"))
SERVED = PROPS["model_path"]


run = functools.partial(run_within, timeout=20.0)  # one coroutine to its end, within the time limit


async def chat_all(client: LlamaServerClient, think: bool | None = None) -> list[StreamChunk]:
    return [c async for c in client.chat(SERVED, HI, think=think, options={"num_predict": 12, "num_ctx": 8192})]


def test_a_streamed_chat_arrives_in_order_with_the_servers_figures_and_transport_stamps() -> None:
    replay = Replay(chat="chat_thinking_template_on.sse")

    async def go() -> list[StreamChunk]:
        async with replaying(replay) as url, LlamaServerClient(url) as client:
            return await chat_all(client, think=True)

    chunks = run(go)
    assert chunks[-1].done and chunks[-1].final is not None and chunks[-1].final.output_tokens == 16
    assert "".join(c.thinking for c in chunks).strip()
    times = [c.t_monotonic for c in chunks]
    assert times == sorted(times) and all(c.request_sent_s is not None and c.request_sent_s <= times[0]
                                          for c in chunks)
    sent = replay.bodies[0]
    assert sent["chat_template_kwargs"] == {"enable_thinking": True} and sent["max_tokens"] == 12
    assert "num_ctx" not in sent and sent["stream"] is True
    assert b"connection: close" in replay.heads[0].lower()


def test_each_streamed_request_has_its_own_connection_as_llama_server_closes_them() -> None:
    replay = Replay(chat="chat_think_off.sse")

    async def go() -> None:
        async with replaying(replay) as url, LlamaServerClient(url) as client:
            for _ in range(3):
                assert (await chat_all(client))[-1].done

    run(go)
    # The replay server would keep a connection open; the client still asks for a new one each time.
    assert replay.connections == 3 and all(b"connection: close" in h.lower() for h in replay.heads)


def test_the_load_generators_client_hands_every_event_to_the_callback() -> None:
    replay = Replay(chat="chat_think_off.sse")
    got: list[StreamChunk] = []

    async def go() -> None:
        async with replaying(replay) as url:
            client = load_client(url)
            try:
                await client.stream_chat(ChatRequest(model="m", messages=tuple(HI), seed=4, max_tokens=12),
                                         got.append)
            finally:
                await client.aclose()

    run(go)
    assert got[-1].done and got[-1].final is not None and got[-1].final.output_tokens == 12
    assert replay.bodies[0]["seed"] == 4 and "chat_template_kwargs" not in replay.bodies[0]


@pytest.mark.parametrize("cut", [1, 5])
def test_a_stream_cut_mid_reply_is_stream_dropped(cut: int) -> None:
    replay = Replay(chat="chat_think_off.sse", cut_after=cut)

    async def go() -> tuple[list[StreamChunk], BaseException | None, BaseException | None]:
        got: list[StreamChunk] = []
        async with replaying(replay) as url, LlamaServerClient(url) as client:
            try:
                await chat_all(client)
                first = None
            except DeckError as exc:
                first = exc
            try:
                await client.stream_chat(ChatRequest(model="m", messages=tuple(HI)), got.append)
                second = None
            except DeckError as exc:
                second = exc
        return got, first, second

    got, first, second = run(go)
    assert isinstance(first, StreamDropped) and isinstance(second, StreamDropped)
    assert len(got) == cut and not any(c.done for c in got)


def test_the_recorded_error_replies_raise_their_typed_errors() -> None:
    async def go(name: str) -> BaseException:
        async with replaying(Replay(chat=name)) as url, LlamaServerClient(url) as client:
            with pytest.raises(ServerError) as caught:
                await chat_all(client)
            return caught.value

    too_long = run(lambda: go("error_context.json"))
    assert type(too_long) is ContextExceeded and isinstance(too_long, BadRequest) and "431 tokens" in too_long.hint
    assert (too_long.prompt_tokens, too_long.context_tokens) == (431, 256)
    loading = run(lambda: go("error_loading.json"))
    assert type(loading) is ServerFault and loading.status == 503


def test_nothing_listening_is_a_connect_error_naming_the_url() -> None:
    url = f"http://127.0.0.1:{closed_port()}"

    async def go() -> None:
        async with LlamaServerClient(url) as client:
            await chat_all(client)

    with pytest.raises(ServerUnreachable, match=f"llama-server at {url}"):
        run(go)
    with pytest.raises(ServerUnreachable):
        load_client("https://example.com")


def test_models_are_the_served_one_then_the_folders_gguf_files(tmp_path: Path) -> None:
    (tmp_path / "qwen3-14b-Q4_K_M.gguf").write_bytes(b"GGUF" + b"\0" * 60)
    (tmp_path / "mmproj-qwen.gguf").write_bytes(b"GGUF")
    (tmp_path / "notes.txt").write_text("not a model")

    async def go() -> tuple[list, str, bool, set]:
        async with replaying(Replay()) as url, LlamaServerClient(url, models_dir=tmp_path) as client:
            loads = {(await client.load(name)).done_reason for name in (SERVED, Path(SERVED).name)}
            return await client.tags(), await client.version(), await client.health(), loads

    models, version, healthy, loaded = run(go)
    assert [m.name for m in models] == [SERVED, "qwen3-14b-Q4_K_M.gguf"]
    assert models[0].quantization_level == "Q4_1" and models[0].parameter_size.endswith("M")
    assert models[1].quantization_level == "Q4_K_M" and models[1].size_bytes == 64 and models[1].format == "gguf"
    # The recorded build is unstamped (b0-unknown): said as the status and the header say it.
    assert version == (probe.version_of(PROPS) or "unknown") and healthy and loaded == {"load"}  # by id and file name


def test_the_served_model_is_listed_as_loaded_without_sizes_the_server_does_not_report(tmp_path: Path) -> None:
    async def go() -> tuple[list, list]:
        async with replaying(Replay()) as url, LlamaServerClient(url, models_dir=tmp_path) as client:
            return await client.ps(), await client.tags()

    running, models = run(go)
    assert [m.name for m in running] == [models[0].name] == [SERVED]  # always loaded: llama-server's one model
    loaded = running[0]
    assert loaded.context_length == PROPS["default_generation_settings"]["n_ctx"] == 1024  # tokens per slot
    assert loaded.size_bytes is None and loaded.size_vram_bytes is None and loaded.processor == ""
    assert loaded.quantization_level == models[0].quantization_level


def test_show_reads_a_folder_files_header_and_names_a_damaged_one(tmp_path: Path) -> None:
    (tmp_path / "cut.gguf").write_bytes(b"GGUF\x03\x00\x00\x00")
    (tmp_path / "garbage.gguf").write_bytes(b"PK\x03\x04 a zip file")

    async def go(name: str) -> BaseException:
        async with replaying(Replay()) as url, LlamaServerClient(url, models_dir=tmp_path) as client:
            with pytest.raises(ServerError) as caught:
                await client.show(name)
            return caught.value

    cut = run(lambda: go("cut.gguf"))
    assert "cut.gguf" in cut.message and "cut short" in cut.message
    garbage = run(lambda: go("garbage.gguf"))
    assert "garbage.gguf" in garbage.message and "not a GGUF file" in garbage.message
    unknown = run(lambda: go("other.gguf"))
    assert type(unknown) is ModelNotFound and "serves the one model" in unknown.hint


def test_what_llama_server_lacks_is_refused_with_what_to_do_instead() -> None:
    async def go() -> list[BaseException]:
        errors: list[BaseException] = []
        async with replaying(Replay()) as url, LlamaServerClient(url) as client:
            for attempt in (lambda: client.unload("m"), lambda: client.delete("m"), lambda: client.load("other")):
                try:
                    await attempt()
                except DeckError as exc:
                    errors.append(exc)
            for stream in (client.pull("m"), client.create("v", "m")):
                try:
                    async for _ in stream:
                        pass
                except DeckError as exc:
                    errors.append(exc)
        return errors

    errors = run(go)
    assert len(errors) == 5 and all(e.hint for e in errors)  # type: ignore[attr-defined]
    assert type(errors[2]) is ModelNotFound


def test_the_served_models_template_decides_thinking_and_a_reason_comes_when_it_cannot(tmp_path: Path) -> None:
    served = write_tiny_gguf(tmp_path / "served.gguf", chat_template="plain, no thinking")
    folder = tmp_path / "models"
    folder.mkdir()
    write_tiny_gguf(folder / "thinker.gguf")  # its own template reads enable_thinking

    async def go(props: str, model: str) -> ModelDetails:
        replay = Replay(props=props, model_path=str(served))
        async with replaying(replay) as url, LlamaServerClient(url, models_dir=folder) as client:
            return await client.show(model, verbose=True)

    # The served model: the server's template counts, not the file's.
    on = run(lambda: go("props_thinking.json", str(served)))
    assert on.supports_thinking and "thinking_reason" not in on.details
    assert on.architecture == "llama" and on.arch_value("block_count") == N_LAYER and on.tensors
    off = run(lambda: go("props.json", str(served)))
    assert not off.supports_thinking and "enable_thinking" in off.details["thinking_reason"]
    # A file in the folder: its own template.
    assert run(lambda: go("props.json", "thinker.gguf")).supports_thinking
    brief = run(lambda: go("props.json", "thinker.gguf"))
    assert brief.details["quantization_level"] == "F32"
