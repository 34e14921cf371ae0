"""The runtime learner on the H200's recorded loads (benchmarks/vram/h200_llama_server_run2.json: llama-server's
logged buffers and NVML's process memory per configuration, driver 580.159.04): each row fed as the app sees a
load (its buffer lines read by the backend's reader, its slots line, then NVML readings), the learnt figure, and
every row priced with it against what NVML read."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pytest

from app.backends.llama_server.log_signals import LlamaServerLogSignals
from app.backends.ollama.show import shape_from_show
from app.core.memory.allowance import DEFAULT_ALLOWANCE, AllowanceSource
from app.core.memory.allowance_learning import LearnedAllowance
from app.core.memory.estimator import GpuMemory, LoadSettings, estimate
from app.core.models import RunningModel
from app.core.telemetry import GpuInfo, GpuSample
from app.core.units import MIB
from app.core.watch.signals import EngineExited
from app.services.runtime_learner import RuntimeLearner

ROOT = Path(__file__).resolve().parents[2]
RUN2 = json.loads((ROOT / "benchmarks/vram/h200_llama_server_run2.json").read_text())
ROWS = [r for r in RUN2["rows"] if r["status"] == "ok"]
H200 = GpuInfo(name=RUN2["meta"]["gpu"], driver=RUN2["meta"]["driver"], memory_total_mib=RUN2["meta"]["gpu_total_mib"])
A4090 = GpuInfo(name="NVIDIA GeForce RTX 4090", driver="580.159.04", memory_total_mib=24564.0)


class Book:
    """An AllowanceBook in memory (the file store has its own tests)."""

    def __init__(self, cards: list[LearnedAllowance] | None = None) -> None:
        self.problem = ""
        self.cards = list(cards or [])
        self.saves = 0

    def load(self) -> list[LearnedAllowance]:
        return list(self.cards)

    def save(self, cards: list[LearnedAllowance]) -> bool:
        self.cards, self.saves = list(cards), self.saves + 1
        return True


def row_log(r: dict) -> list[str]:
    """The load's lines as llama-server prints them at -lv 4 (with its prefix), in the order it prints them."""
    return [f"0.00.644.933 I load_tensors:   CPU_Mapped model buffer size = {r['cpu_mapped_model']:8.2f} MiB",
            f"0.00.644.935 I load_tensors:        CUDA0 model buffer size = {r['cuda0_model']:8.2f} MiB",
            "0.01.531.351 I llama_context:  CUDA_Host  output buffer size =     0.58 MiB",
            f"0.01.531.920 I llama_kv_cache:      CUDA0 KV buffer size = {r['cuda0_kv']:8.2f} MiB",
            f"0.01.563.694 I sched_reserve:      CUDA0 compute buffer size = {r['cuda0_compute']:8.2f} MiB",
            f"0.01.563.706 I sched_reserve:  CUDA_Host compute buffer size = {r['cuda_host_compute']:8.2f} MiB",
            "0.01.563.710 I sched_reserve: graph: nodes = 1446, splits = 2, input objects = 4, input tensors = 9",
            f"0.01.651.167 I srv    load_model: initializing, n_slots = {r['parallel']}, "
            f"n_ctx_slot = {r['ctx_per_slot']}, kv_unified = 'false'"]


def sample(process_mib: float, t: float = 0.0) -> GpuSample:
    return GpuSample(t=t, memory_used_mib=process_mib + 615.0, memory_total_mib=H200.memory_total_mib,
                     server_memory_mib=process_mib, utilization_pct=0.0, power_w=100.0, temperature_c=40.0)


def feed_row(learner: RuntimeLearner, r: dict) -> None:
    """One load: a fresh server's log, then NVML after load, then the peak while serving (the pool grown)."""
    learner.follow(LlamaServerLogSignals())
    for line in row_log(r):
        learner.feed_log(line)
    learner.feed_gpu(sample(r["process_mib"]))
    learner.feed_gpu(sample(r["peak_mib"]))


def logged_gpu_mib(r: dict) -> float:
    return r["cuda0_model"] + r["cuda0_kv"] + r["cuda0_compute"]


def test_one_load_teaches_its_process_memory_less_its_gpu_buffers() -> None:
    book = Book()
    learner = RuntimeLearner(book, H200, now_iso=lambda: "2026-12-02T15:40:00+00:00")
    r = ROWS[0]
    assert learner.allowance() is DEFAULT_ALLOWANCE

    feed_row(learner, r)

    learnt = learner.allowance()
    assert learnt.source is AllowanceSource.LEARNED and (learnt.gpu_name, learnt.driver) == (H200.name, H200.driver)
    # 9536 MiB read by NVML less 8161.75 + 640 + 146.01 logged on CUDA0 (the host-side buffers do not count)
    assert learnt.size_bytes == round(9536.0 * MIB) - round(8161.75 * MIB) - 640 * MIB - round(146.01 * MIB)
    assert learnt.size_bytes / MIB == pytest.approx(588.24, abs=0.01)
    assert learnt.loads == 1 and book.saves == 1  # the peak reading later (the pool grown) changed nothing
    assert learnt.describe().startswith("588 MiB, learnt on NVIDIA H200 (driver 580.159.04) from 1 load")
    assert learner.allowance(A4090) is DEFAULT_ALLOWANCE  # another card is priced with the default


def test_the_recorded_h200_loads_teach_592_mib_and_price_every_process_within_64_mib() -> None:
    learner = RuntimeLearner(Book(), H200)
    for r in ROWS:
        feed_row(learner, r)
    learnt = learner.allowance()

    assert learnt.loads == len(ROWS) == 35
    figures = sorted(r["process_mib"] - logged_gpu_mib(r) for r in ROWS)
    assert figures[0] == pytest.approx(586.75, abs=0.01) and figures[-1] == pytest.approx(592.16, abs=0.01)
    # the median of the last five loads' figures
    assert learnt.size_bytes / MIB == pytest.approx(statistics.median(
        r["process_mib"] - logged_gpu_mib(r) for r in ROWS[-5:]), abs=0.01)
    assert 586 <= learnt.size_bytes / MIB <= 593  # the H200's ~592 MiB per process

    shape = shape_from_show(json.loads((ROOT / "tests/data/show_qwen3_14b.json").read_text()), 9_000_210_784)
    learnt_gpu = GpuMemory.with_allowance(int(H200.memory_total_mib * MIB), allowance=learnt)
    default_gpu = GpuMemory.with_allowance(int(H200.memory_total_mib * MIB))
    errors, default_errors = [], []
    for r in ROWS:
        settings = LoadSettings(num_ctx=r["ctx_per_slot"], parallel=r["parallel"], kv_cache_type=r["kv_cache"],
                                flash_attention=r["flash_attention"] == "on", num_batch=r["batch"],
                                num_ubatch=r["ubatch"])
        priced = estimate(shape, settings, learnt_gpu)
        assert priced.allowance == learnt and priced.overhead_bytes == learnt.size_bytes
        errors.append(priced.total_gpu_bytes / MIB - r["process_mib"])
        default_errors.append(estimate(shape, settings, default_gpu).total_gpu_bytes / MIB - r["process_mib"])
    print(f"worst process error: learnt {max(map(abs, errors)):.0f} MiB, default {max(map(abs, default_errors)):.0f} MiB")
    assert max(abs(e) for e in errors) <= 64
    assert min(abs(e) for e in default_errors) > 64  # the default (450 MiB) is ~140 MiB short on every row


def test_the_smallest_reading_after_the_load_counts_and_the_next_load_starts_afresh() -> None:
    book = Book()
    learner = RuntimeLearner(book, H200)
    r = ROWS[0]
    learner.follow(LlamaServerLogSignals())
    lines = row_log(r)
    for line in lines[:-1]:  # buffers logged, the slots not yet initialised: readings are of a load under way
        learner.feed_log(line)
    learner.feed_gpu(sample(r["process_mib"] - 200))
    assert learner.allowance() is DEFAULT_ALLOWANCE
    learner.feed_log(lines[-1])
    learner.feed_gpu(sample(r["process_mib"] + 20))
    learner.feed_gpu(sample(r["process_mib"]))  # lower: the same load's figure, read again
    assert learner.allowance().loads == 1
    assert learner.allowance().size_bytes / MIB == pytest.approx(588.24, abs=0.01)

    learner.feed_signal(EngineExited("llama-server terminated", error="exit status 1"))  # that load is over
    learner.feed_gpu(sample(700.0))  # a new process starting: not a reading of the load
    assert learner.allowance().loads == 1 and learner.allowance().size_bytes / MIB == pytest.approx(588.24, abs=0.01)


@pytest.mark.parametrize("case", ["no GPU buffer", "two GPUs", "negative", "over 4 GiB", "two models", "no GPU",
                                  "NaN"])
def test_nonsense_is_refused(case: str) -> None:
    r = ROWS[0]
    learner = RuntimeLearner(Book(), None if case == "no GPU" else H200)
    learner.follow(LlamaServerLogSignals())
    lines = row_log(r)
    if case == "no GPU buffer":
        lines = [line.replace("CUDA0", "CPU") for line in lines]
    if case == "two GPUs":
        lines.insert(2, "0.00.644.936 I load_tensors:        CUDA1 model buffer size =  1024.00 MiB")
    if case == "two models":
        learner.feed_loaded([RunningModel("a", "a", 1, 1), RunningModel("b", "b", 1, 1)])
    for line in lines:
        learner.feed_log(line)
    process = {"negative": logged_gpu_mib(r) - 10, "over 4 GiB": logged_gpu_mib(r) + 4097,
               "NaN": math.nan}.get(case, r["process_mib"])
    learner.feed_gpu(sample(process))

    assert learner.allowance() is DEFAULT_ALLOWANCE


def test_layers_on_the_cpu_change_nothing_only_gpu_buffers_count() -> None:
    learner = RuntimeLearner(Book(), H200)
    learner.follow(LlamaServerLogSignals())
    for line in ["load_tensors: offloaded 27/41 layers to GPU",
                 "load_tensors:   CPU_Mapped model buffer size =  2901.30 MiB",
                 "load_tensors:        CUDA0 model buffer size =  5677.75 MiB",
                 "llama_kv_cache:      CUDA0 KV buffer size =  4320.00 MiB",
                 "llama_kv_cache:        CPU KV buffer size =  2080.00 MiB",
                 "sched_reserve:      CUDA0 compute buffer size =  1370.00 MiB",
                 "sched_reserve:  CUDA_Host compute buffer size =    90.00 MiB",
                 "srv    load_model: initializing, n_slots = 8, n_ctx_slot = 4096, kv_unified = 'false'"]:
        learner.feed_log(line)
    learner.feed_gpu(sample(5677.75 + 4320 + 1370 + 590))
    assert learner.allowance().size_bytes / MIB == pytest.approx(590, abs=0.01)


def test_a_kept_figure_prices_from_the_start_and_later_loads_refine_it() -> None:
    kept = LearnedAllowance(H200.name, H200.driver, (600 * MIB,), 1, "2026-12-01T10:00:00+00:00")
    book = Book([kept, LearnedAllowance(A4090.name, A4090.driver, (420 * MIB,), 3, "2026-11-30T10:00:00+00:00")])
    learner = RuntimeLearner(book, H200)
    assert learner.allowance().size_bytes == 600 * MIB and learner.allowance().loads == 1
    assert learner.allowance(A4090).size_bytes == 420 * MIB
    seen = []
    learner.subscribe(seen.append)

    feed_row(learner, ROWS[0])
    feed_row(learner, ROWS[1])

    assert learner.allowance().loads == 3 and learner.allowance().size_bytes / MIB == pytest.approx(588.24, abs=0.01)
    assert [round(a.size_bytes / MIB) for a in seen] == [594, 588]  # the median of (600, 588), then of three
    assert {c.gpu_name for c in book.cards} == {H200.name, A4090.name}  # the other card is kept as it was


def test_the_log_of_a_load_through_ollama_teaches_the_same() -> None:
    """Ollama passes its llama-server child's lines through as printed (--no-log-prefix) between its own."""
    from app.backends.ollama.log_signals import OllamaLogSignals

    r = ROWS[0]
    learner = RuntimeLearner(Book(), H200)
    learner.follow(OllamaLogSignals())
    starting = ('time=2026-12-02T10:00:00.000Z level=INFO source=llama_server.go:433 msg="starting llama-server" '
                'cmd="/usr/lib/ollama/llama-server --model /m/blobs/sha256-abc --port 35811 -c 4096 -np 1 '
                '--log-verbosity 4 --no-log-prefix --no-log-timestamps"')
    started = ('time=2026-12-02T10:00:04.000Z level=INFO source=llama_server.go:1362 '
               'msg="llama-server started in 4.00 seconds"')
    for line in [starting, *(line.split(" I ", 1)[1] for line in row_log(r)), started]:
        learner.feed_log(line)
    learner.feed_gpu(sample(r["process_mib"]))
    assert learner.allowance().size_bytes / MIB == pytest.approx(588.24, abs=0.01)

    learner.feed_log(starting.replace("sha256-abc", "sha256-def"))  # the next load: the old process is going
    learner.feed_gpu(sample(600.0))
    assert learner.allowance().loads == 1


def test_where_the_server_reports_its_models_readings_wait_for_a_report_of_one_model() -> None:
    r = ROWS[0]
    learner = RuntimeLearner(Book(), H200)
    one, two = [RunningModel("qwen3:14b", "qwen3:14b", 1, 1)], [RunningModel("a", "a", 1, 1), RunningModel("b", "b", 1, 1)]
    learner.feed_loaded(one)  # the server reports its loaded models (read before this load: it confirms nothing)
    learner.follow(LlamaServerLogSignals())
    for line in row_log(r):
        learner.feed_log(line)
    learner.feed_gpu(sample(r["process_mib"] + 30))
    learner.feed_gpu(sample(r["process_mib"]))
    assert learner.allowance() is DEFAULT_ALLOWANCE  # waiting for a report after the load
    learner.feed_loaded(one)
    assert learner.allowance().size_bytes / MIB == pytest.approx(588.24, abs=0.01)  # the smallest that waited

    learner.follow(LlamaServerLogSignals())  # the next load, while the first model stays loaded
    for line in row_log(ROWS[1]):
        learner.feed_log(line)
    learner.feed_gpu(sample(ROWS[1]["process_mib"] + 2000))  # both engines' memory
    learner.feed_loaded(two)
    learner.feed_gpu(sample(ROWS[1]["process_mib"] + 2000))
    assert learner.allowance().loads == 1
