"""Ollama's log read into the watchdog's signals, on what the real Ollama 0.32.15 and its llama-server child
logged here (tests/data/ollama/real/watch_*.log, recorded by tests/data/ollama/record_watch.py; see the README
there), and on the lines only a GPU build prints, as published CUDA logs show them."""

from __future__ import annotations

from datetime import datetime, UTC
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from app.adapters.process.attached_log import MARK
from app.backends.ollama.log_signals import OllamaLogSignals, ollama_log_signals
from app.backends.ollama.spec import OLLAMA
from app.core.watch.events import EventKind, Source
from app.core.watch.signals import (
    Asked, BufferLogged, CacheExhausted, ContextShifted, EngineExited, LaunchSeen, LayersPlaced, LoadFinished, PromptCut,
    ServerListening,
)
from app.core.units import MIB
from app.services.watchdog import Watchdog

REAL = Path(__file__).resolve().parents[2] / "data" / "ollama" / "real"
BLOB = "$ROOT/models/blobs/sha256-941f309b54caaad6747569ba43712bcde44a2be3bae16c3282ff499c37c54af5"


def read(name: str, buffers: bool = False) -> list:
    """The signals of a recorded log (the buffer lines' only where asked: test_log_signals_buffers reads them)."""
    reader = OllamaLogSignals()
    return [s for line in (REAL / name).read_text().splitlines() for s in reader.read(line)
            if buffers or not isinstance(s, BufferLogged)]


def test_the_spec_gives_a_fresh_reader_per_log() -> None:
    assert OLLAMA.log_signals is ollama_log_signals
    first, second = OLLAMA.log_signals(), OLLAMA.log_signals()
    assert first is not second and isinstance(first, OllamaLogSignals)


def test_a_short_context_log_cuts_prompts_caps_a_context_and_loses_a_killed_child() -> None:
    """OLLAMA_CONTEXT_LENGTH=1024: two ~6,200-token prompts (generate, then chat), num_ctx 16384 on a model
    trained to 8192, an unload and a reload, the child killed and the next request."""
    signals = read("watch_short_context.log")
    assert [type(s) for s in signals] == [
        ServerListening,
        LaunchSeen, LaunchSeen, LoadFinished, PromptCut, PromptCut,  # first load, the two cut prompts
        LaunchSeen, LaunchSeen, LaunchSeen, LoadFinished,  # num_ctx 16384: Ollama's warning, -c 8192, the child
        LaunchSeen, LaunchSeen, LoadFinished,  # after the unload (which is not logged): a new load
        EngineExited, LaunchSeen, LaunchSeen, LoadFinished,  # the killed child, found at the next request
    ]
    assert signals[0] == ServerListening(signals[0].line, version="0.32.15")
    start = signals[1]
    assert (start.parallel, start.context_total, start.gpu_layers, start.model) == (1, 1024, None, BLOB)
    assert signals[2] == LaunchSeen("srv    load_model: initializing, n_slots = 1, n_ctx_slot = 1024, "
                                    "kv_unified = 'false'", parallel=1, context_per_slot=1024)
    assert signals[3].seconds is not None and signals[3].seconds > 0  # the first of the load's two "started in"
    assert signals[4] == PromptCut(signals[4].line, sent=6200, kept=514)  # the generate's 6,200 tokens kept to 514
    assert signals[4].line.split(" level=")[1] == ('WARN source=llama_server.go:317 msg="truncating input prompt" '
                                                  "limit=514 prompt=6200 keep=4 new=514")
    assert (signals[5].sent, signals[5].kept) == (6200, 514)  # the same text as one chat message
    assert signals[6] == LaunchSeen(signals[6].line, context_per_slot=8192)
    assert signals[6].line.endswith('level=WARN source=server.go:114 msg="requested context size too large for model" '
                                    "num_ctx=16384 n_ctx_train=8192")
    assert (signals[7].context_total, signals[7].parallel) == (8192, 1)
    assert signals[8].context_per_slot == 8192
    assert signals[13] == EngineExited(signals[13].line, error="signal: killed")
    assert 'msg="llama-server process no longer running" sys=9' in signals[13].line  # logged twice, read once


def test_a_reply_past_a_small_context_shifts_it() -> None:
    """OLLAMA_CONTEXT_LENGTH=256 and 400 tokens generated after a 26-token prompt."""
    signals = read("watch_context_shift.log")
    shifts = [s for s in signals if isinstance(s, ContextShifted)]
    assert shifts == [ContextShifted("slot   operator(): id  0 | task 0 | slot context shift, n_keep = 4, "
                                     "n_left = 251, n_discard = 125", slot=0, dropped_tokens=125)] * 2
    assert [s.context_per_slot for s in signals if isinstance(s, LaunchSeen)] == [None, 256]


def test_slots_that_do_not_fit_fail_the_load_rather_than_shrink() -> None:
    """OLLAMA_NUM_PARALLEL=256 at 8192: Ollama asks for all 256 slots and the child cannot allocate them."""
    signals = read("watch_too_many_slots.log")
    assert [type(s) for s in signals] == [ServerListening, LaunchSeen, EngineExited]
    assert (signals[1].parallel, signals[1].context_total) == (256, 2097152)
    assert signals[2].error == "exit status 1" and 'msg="llama-server terminated"' in signals[2].line


def test_the_earlier_recordings_read_the_same_way() -> None:
    """record.py's logs: parallel 2 at 2048 per slot; a q8_0 cache with flash attention off fails each load."""
    signals = read("serve_parallel2.log")
    launches = [s for s in signals if isinstance(s, LaunchSeen)]
    assert [(s.parallel, s.context_total, s.context_per_slot) for s in launches][:2] == [(2, 4096, None),
                                                                                          (2, None, 2048)]
    assert [s.seconds for s in signals if isinstance(s, LoadFinished)][0] == 1.81
    failed = read("serve_q8_fa_off.log")
    assert [s.error for s in failed if isinstance(s, EngineExited)] == ["exit status 1"] * 2


# Lines only a build with a GPU backend prints, as llama.cpp words them (src/llama-model.cpp load_tensors,
# src/llama-context.cpp decode, tools/server/server-context.cpp), copied from published logs of Ollama's and
# llama-server's CUDA runs (ollama/ollama#11986 for the whole model on the GPU; a 33-layer model split 20/13)
# and from llama.cpp's format strings at the version the kit builds.
GPU_LINES = {
    "load_tensors: offloaded 81/81 layers to GPU": LayersPlaced("", on_gpu=81, total=81),
    "load_tensors: offloaded 20/33 layers to GPU": LayersPlaced("", on_gpu=20, total=33),
    "load_tensors: offloading 20 repeating layers to GPU": None,
    "load_tensors:        CUDA0 model buffer size =  2495.31 MiB":
        BufferLogged("", buffer="CUDA0", kind="model", size_bytes=round(2495.31 * MIB), device=0),
    "decode: failed to find a memory slot for batch of size 512": CacheExhausted(""),
    "srv        decode: failed to find free space in the KV cache, retrying with smaller batch size, off = 0, "
    "n_batch = 256, ret = 1": CacheExhausted(""),
    "srv        decode: Context size has been exceeded. off = 0, n_batch = 1, ret = 1": CacheExhausted(""),
    "srv    load_model: the slot context (65536) exceeds the training context of the model (40960) - capping":
        LaunchSeen("", context_per_slot=40960),
    "slot   operator(): id  3 | task 812 | slot context shift, n_keep = 5, n_left = 8186, n_discard = 4093":
        ContextShifted("", slot=3, dropped_tokens=4093),
}


def test_the_gpu_and_full_cache_lines() -> None:
    for line, expected in GPU_LINES.items():
        got = OllamaLogSignals().read(line)
        if expected is None:
            assert got == (), line
        else:
            (signal,) = got
            assert signal == type(expected)(line, **{k: v for k, v in vars(expected).items() if k != "line"}), line


def test_the_apps_own_lines_and_odd_lines_say_nothing() -> None:
    reader = OllamaLogSignals()
    for line in (f"{MARK}journalctl stopped (exit 1).", "", "time=", 'time=x msg="starting llama-server" cmd=""',
                 'time=x msg="truncating input prompt" prompt=lots new=514', "[GIN] 2026/12/02 | 200 | POST",
                 'time=x level=WARN msg="requested context size too large for model" n_ctx_train=many'):
        got = reader.read(line)
        assert all(isinstance(s, PromptCut) and s.sent is None for s in got), (line, got)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(max_size=200), max_size=8))
def test_never_raises_on_what_a_log_holds(lines: list[str]) -> None:
    reader = OllamaLogSignals()
    for line in lines:
        reader.read(line)
        reader.read('time=2026 level=WARN msg="llama-server process no longer running" string="' + line + '"')


def test_the_watchdog_reads_the_recorded_logs_into_events() -> None:
    """The recorded log through a Watchdog held, like the app's, to the settings of each request (num_ctx 1024,
    then 16384 on a model trained to 8192, then 1024 again): the two cuts with Ollama's own counts, the
    context capped at 8192 (once, read from Ollama's warning), the killed child; the shifts of the other log."""
    clock = iter(float(t) for t in range(1_000_000))
    dog = Watchdog(subject="http://127.0.0.1:11434", log_reader=OLLAMA.log_signals(), clock=lambda: next(clock))
    lines = (REAL / "watch_short_context.log").read_text().splitlines()
    big = next(i for i, line in enumerate(lines) if "num_ctx=16384" in line)
    back = [i for i, line in enumerate(lines) if "starting llama-server" in line][2]
    for asked, part in ((1024, lines[:big]), (16384, lines[big:back]), (1024, lines[back:])):
        dog.expect(Asked(context_per_slot=asked, model="smollm2"))
        for line in part:
            dog.feed_log(line)
    made = dog.events()
    assert [e.kind for e in made] == [EventKind.PROMPT_TRUNCATED, EventKind.PROMPT_TRUNCATED,
                                      EventKind.SMALLER_CONTEXT, EventKind.SERVER_CRASHED]
    cut = made[0]
    assert cut.subject == "smollm2" and cut.evidence[0].source is Source.LOG
    assert dict(cut.evidence[0].figures) == {"prompt_tokens_sent": 6200.0, "prompt_tokens_kept": 514.0}
    assert "(514 of 6200 tokens kept)" in cut.summary
    smaller = made[2]
    assert smaller.subject == "smollm2" and "requested context size too large" in smaller.evidence[0].text
    assert dict(smaller.evidence[0].figures) == {"context_per_slot": 8192.0, "context_per_slot_asked": 16384.0}
    assert "signal: killed" in made[3].summary

    shifted = Watchdog(log_reader=OLLAMA.log_signals(), clock=lambda: 0.0)
    for line in (REAL / "watch_context_shift.log").read_text().splitlines():
        shifted.feed_log(line)
    (shift,) = shifted.events()  # two shifts of one reply: one episode
    assert shift.kind is EventKind.CONTEXT_SHIFT and dict(shift.evidence[0].figures) == {
        "slot": 0.0, "dropped_tokens": 125.0}


def test_every_signal_is_dated_by_the_ollama_line_at_or_before_it() -> None:
    reader = OllamaLogSignals()
    (listening,) = reader.read('time=2026-12-02T12:50:10.500Z level=INFO source=routes.go:1 '
                               'msg="Listening on 127.0.0.1:11434 (version 0.32.15)"')
    assert listening.logged_at == datetime(2026, 12, 2, 12, 50, 10, 500000, tzinfo=UTC).timestamp()
    (shift,) = reader.read("slot   operator(): id  0 | task 7 | slot context shift, n_keep = 5, n_left = 250, "
                           "n_discard = 125")
    assert shift.logged_at == listening.logged_at  # a child's line has no time of its own
