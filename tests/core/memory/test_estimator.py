"""The VRAM estimator: llama.cpp's arithmetic, Ollama's placement per era, verdicts and laws.

Calibration is checked against the raw llama-server measurements kept in benchmarks/vram/
(real H200 runs of a Qwen3-14B-shaped Q4_K_M model): every row must stay within the accuracy
target, so a change to the formulas that breaks agreement with the hardware fails here. The
held-out rows (Llama-3.1-8B, Qwen2.5-7B, Gemma-3-12B, Mistral-7B shapes, never used for fitting)
are checked with tolerances a little above the errors first measured on them, and so are the
mixture-of-experts Qwen3-30B-A3B rows (two MoE terms fitted on 12 of them, 7 measured afterwards).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from app.backends.ollama.launch_plan import OllamaEra, era_for_version
from app.backends.ollama.legacy import LEGACY_CUDA_MINIMUM_BYTES, legacy_estimate
from app.backends.ollama.planner import ERA_RULES
from app.core.errors import EstimateError
from app.core.memory.estimator import DEFAULT_RUNTIME_OVERHEAD_BYTES, GpuMemory, LoadSettings, estimate
from app.core.memory.llama_cpp import kv_layer_bytes, peak_extra_bytes, plan_context
from app.core.memory.verdict import VERDICTS, ps_processor
from app.backends.ollama.show import shape_from_show
from app.core.units import GIB, MIB

ROOT = Path(__file__).resolve().parents[3]
RTX_4090 = GpuMemory(total_bytes=24564 * MIB)
H200 = GpuMemory(total_bytes=143771 * MIB, runtime_overhead_bytes=588 * MIB)
QWEN = shape_from_show(json.loads((ROOT / "tests/data/show_qwen3_14b.json").read_text()), 9_000_210_784)
GEMMA = shape_from_show(json.loads((ROOT / "tests/data/show_gemma3_12b.json").read_text()), 8_149_190_253)
LLAMA = shape_from_show(json.loads((ROOT / "tests/data/show_llama3_1_8b.json").read_text()), 4_920_753_328)


# Held-out model shapes: /api/show JSON (verbose, with the tensor list) and GGUF size in bytes.
HELDOUT_SHOWS = {
    "llama3.1-8b": ("show_llama3_1_8b_tensors.json", 4_915_500_384),
    "qwen2.5-7b": ("show_qwen2_5_7b.json", 4_680_225_664),
    "gemma3-12b": ("show_gemma3_12b_text.json", 7_299_456_064),
    "mistral-7b": ("show_mistral_7b.json", 4_372_715_520),
}
HELDOUT = {name: shape_from_show(json.loads((ROOT / "tests/data" / file).read_text()), size)
           for name, (file, size) in HELDOUT_SHOWS.items()}
# Mixture of experts: Qwen3-30B-A3B (128 experts, 8 per token); its two MoE terms were fitted on its rows.
MOE = shape_from_show(json.loads((ROOT / "tests/data/show_qwen3_30b_a3b.json").read_text()), 18_553_835_456)


def measured_rows(heldout: bool = False, moe: bool = False) -> list[dict]:
    rows = []
    for path in sorted((ROOT / "benchmarks/vram").glob("h200_*.json")):
        if path.name.startswith("h200_spill"):  # Ollama's loads (tests/core/memory/test_spill_compute.py)
            continue
        for r in json.loads(path.read_text())["rows"]:
            if "cuda_model_buffer_mib" in r:
                r = dict(r, cuda0_model=r["cuda_model_buffer_mib"], cuda0_kv=r["cuda_kv_buffer_mib"],
                         cuda0_compute=r["cuda_compute_buffer_mib"], status="ok", long_prompt_tokens=70)
            if ("shape" in r) != (heldout or moe) or (r.get("shape") == "qwen3-30b-a3b") != moe:
                continue
            if r.get("status") == "ok" and r.get("process_mib") and r.get("cuda0_compute"):
                rows.append(r)
    return rows


ROWS = measured_rows()
HELDOUT_ROWS = measured_rows(heldout=True)
MOE_ROWS = measured_rows(moe=True)


def _settings_of(row: dict) -> LoadSettings:
    return LoadSettings(num_ctx=row["ctx_per_slot"], parallel=row["parallel"], kv_cache_type=row["kv_cache"],
                        flash_attention=row["flash_attention"] == "on", num_batch=row["batch"], num_ubatch=row["ubatch"])


@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{r['ctx_per_slot']}x{r['parallel']}-{r['kv_cache']}-fa{r['flash_attention']}-ub{r['ubatch']}")
def test_matches_measured_llama_server_buffers(row: dict) -> None:
    s = LoadSettings(num_ctx=row["ctx_per_slot"], parallel=row["parallel"], kv_cache_type=row["kv_cache"],
                     flash_attention=row["flash_attention"] == "on", num_batch=row["batch"], num_ubatch=row["ubatch"])
    est = estimate(QWEN, s, H200)
    assert est.weights_gpu_bytes / MIB == pytest.approx(row["cuda0_model"], abs=0.01)
    assert est.kv_gpu_bytes / MIB == pytest.approx(row["cuda0_kv"], abs=0.01)
    assert est.compute_bytes / MIB == pytest.approx(row["cuda0_compute"], abs=1.0)
    buffers = row["cuda0_model"] + row["cuda0_kv"] + row["cuda0_compute"]
    assert (est.weights_gpu_bytes + est.kv_gpu_bytes + est.compute_bytes) / MIB == pytest.approx(buffers, rel=0.03)
    assert abs(est.total_gpu_bytes / MIB - row["process_mib"]) < 16  # with this H200's 588 MiB runtime
    plan = plan_context(QWEN, s.num_ctx, s.parallel, s.ubatch)
    extra = peak_extra_bytes(QWEN, plan, est.kv_cache_type, s.flash_attention, row["long_prompt_tokens"])
    assert abs((est.total_gpu_bytes + extra) / MIB - row["peak_mib"]) < 32


def test_there_are_measurements_to_check() -> None:
    assert len(ROWS) >= 30
    kinds = {(r["kv_cache"], r["flash_attention"]) for r in ROWS}
    assert kinds == {("f16", "on"), ("q8_0", "on"), ("q4_0", "on"), ("f16", "off")}


@pytest.mark.parametrize("row", HELDOUT_ROWS, ids=lambda r: f"{r['shape']}-{r['ctx_per_slot']}x{r['parallel']}-"
                         f"{r['kv_cache']}-fa{r['flash_attention']}-ub{r['ubatch']}")
def test_held_out_shapes_match_measured_llama_server(row: dict) -> None:
    shape, s = HELDOUT[row["shape"]], _settings_of(row)
    est = estimate(shape, s, H200)  # H200's runtime overhead comes from the in-sample rows
    assert est.weights_gpu_bytes / MIB == pytest.approx(row["cuda0_model"], abs=0.5)
    assert est.kv_gpu_bytes / MIB == pytest.approx(row["cuda0_kv"], abs=0.01)
    # worst measured: 17 MiB (gemma3 without flash attention); ggml's allocator placement
    assert est.compute_bytes / MIB == pytest.approx(row["cuda0_compute"], abs=24)
    buffers = row["cuda0_model"] + row["cuda0_kv"] + row["cuda0_compute"]
    assert (est.weights_gpu_bytes + est.kv_gpu_bytes + est.compute_bytes) / MIB == pytest.approx(buffers, rel=0.005)
    assert abs(est.total_gpu_bytes / MIB - row["process_mib"]) < 32  # worst measured 22 MiB
    plan = plan_context(shape, s.num_ctx, s.parallel, s.ubatch)
    extra = peak_extra_bytes(shape, plan, est.kv_cache_type, s.flash_attention, row["long_prompt_tokens"])
    assert abs((est.total_gpu_bytes + extra) / MIB - row["peak_mib"]) < 48  # worst measured 32 MiB


@pytest.mark.parametrize("row", MOE_ROWS, ids=lambda r: f"{r['ctx_per_slot']}x{r['parallel']}-"
                         f"{r['kv_cache']}-fa{r['flash_attention']}-ub{r['ubatch']}")
def test_a_mixture_of_experts_model_matches_measured_llama_server(row: dict) -> None:
    s = _settings_of(row)
    est = estimate(MOE, s, H200)
    assert est.weights_gpu_bytes / MIB == pytest.approx(row["cuda0_model"], abs=0.5)  # all 128 experts
    assert est.kv_gpu_bytes / MIB == pytest.approx(row["cuda0_kv"], abs=0.01)
    assert est.compute_bytes / MIB == pytest.approx(row["cuda0_compute"], abs=24)  # worst measured 16.1 MiB
    assert abs(est.total_gpu_bytes / MIB - row["process_mib"]) < 32  # worst measured 21 MiB
    plan = plan_context(MOE, s.num_ctx, s.parallel, s.ubatch)
    extra = peak_extra_bytes(MOE, plan, est.kv_cache_type, s.flash_attention, row["long_prompt_tokens"])
    assert abs((est.total_gpu_bytes + extra) / MIB - row["peak_mib"]) < 32  # worst measured 21 MiB


def test_the_moe_rows_cover_every_kind_and_four_micro_batches() -> None:
    assert len(MOE_ROWS) == 19  # 12 the MoE terms were fitted on, 7 checked afterwards
    assert {(r["kv_cache"], r["flash_attention"]) for r in MOE_ROWS} == {
        ("f16", "on"), ("q8_0", "on"), ("q4_0", "on"), ("f16", "off")}
    assert {r["ubatch"] for r in MOE_ROWS} == {256, 512, 1024, 2048}


def test_held_out_measurements_cover_four_shapes_and_every_kind() -> None:
    assert len(HELDOUT_ROWS) >= 40
    assert {r["shape"] for r in HELDOUT_ROWS} == set(HELDOUT_SHOWS)
    for name in HELDOUT_SHOWS:
        kinds = {(r["kv_cache"], r["flash_attention"]) for r in HELDOUT_ROWS if r["shape"] == name}
        assert kinds == {("f16", "on"), ("q8_0", "on"), ("q4_0", "on"), ("f16", "off")}, name
    assert HELDOUT["gemma3-12b"].sliding_window == 1024 and sum(HELDOUT["gemma3-12b"].swa_layers) == 40
    # a sliding-window model logs two KV buffers (full-attention and window caches), both counted
    assert all(len(r["cuda0_kv_buffers"]) == 2 for r in HELDOUT_ROWS if r["shape"] == "gemma3-12b")


def test_plain_and_verbose_show_read_the_same_llama_shape() -> None:
    plain, verbose = LLAMA, HELDOUT["llama3.1-8b"]
    for field in ("architecture", "n_layer", "n_embd", "n_ff", "n_head", "n_head_kv", "key_length",
                  "value_length", "n_vocab", "context_length", "tied_embeddings", "sliding_window"):
        assert getattr(plain, field) == getattr(verbose, field), field
    assert verbose.key_length == 128  # no key_length key: n_embd / n_head
    assert HELDOUT["qwen2.5-7b"].key_length == 128 and HELDOUT["qwen2.5-7b"].n_head_kv == (4,) * 28
    assert HELDOUT["gemma3-12b"].key_length == 256  # from the key, not 3840 / 16
    assert verbose.weights.from_tensors and not plain.weights.from_tensors


def test_kv_bytes_per_element_and_padding() -> None:
    f16 = sum(kv_layer_bytes(QWEN, plan_context(QWEN, 32768, 1, 512), "f16"))
    assert f16 == 40 * 32768 * 8 * 256 * 2  # 160 KiB per token → 5 GiB
    q8 = sum(kv_layer_bytes(QWEN, plan_context(QWEN, 32768, 1, 512), "q8_0"))
    q4 = sum(kv_layer_bytes(QWEN, plan_context(QWEN, 32768, 1, 512), "q4_0"))
    assert q8 == f16 * 34 // 64 and q4 == f16 * 18 // 64
    plan = plan_context(QWEN, 1000, 3, 512)
    assert (plan.n_ctx_seq, plan.n_ctx_total, plan.n_stream) == (1024, 3072, 3)


def test_quantized_kv_falls_back_to_f16_without_flash_attention() -> None:
    off = estimate(QWEN, LoadSettings(num_ctx=8192, kv_cache_type="q8_0", flash_attention=False), RTX_4090)
    assert off.kv_cache_type == "f16" and "flash attention" in off.notes[0]
    assert off.kv_bytes == estimate(QWEN, LoadSettings(num_ctx=8192, flash_attention=False), RTX_4090).kv_bytes


def test_gemma_sliding_layers_keep_only_the_window() -> None:
    plan = plan_context(GEMMA, 32768, 1, 512)
    kv = kv_layer_bytes(GEMMA, plan, "f16")
    assert kv[5] == 32768 * 8 * 512 * 2  # a global layer holds the whole context
    assert kv[0] == 1536 * 8 * 512 * 2  # a window layer: 1024 + ubatch, padded to 256
    assert plan.swa_cells_per_stream == 1536


def test_token_embedding_table_stays_in_host_memory() -> None:
    est = estimate(QWEN, LoadSettings(num_ctx=4096), H200)
    assert est.weights_cpu_bytes == QWEN.weights.token_embd_bytes
    assert est.layers_on_gpu == est.layers_total == 41 and est.processor == "100% GPU"


def test_totals_are_sums_of_parts() -> None:
    est = estimate(QWEN, LoadSettings(num_ctx=16384, parallel=2), RTX_4090)
    assert est.total_gpu_bytes == est.weights_gpu_bytes + est.kv_gpu_bytes + est.compute_bytes + est.overhead_bytes
    assert est.peak_gpu_bytes == est.total_gpu_bytes + est.peak_extra_bytes
    assert est.headroom_bytes == est.available_bytes - est.peak_gpu_bytes


@pytest.mark.parametrize(("version", "era"), [("0.6.6", "A"), ("0.11.10", "A"), ("0.11.11", "B"), ("0.12.6", "B"),
                                              ("0.24.0", "B"), ("0.30.0", "C"), ("v0.33.1-rc1", "C"), (None, "C"),
                                              # llama-server's own builds run llama.cpp's --fit
                                              ("b6123-abc1234", "C"), ("b11434", "C"), ("local build", "C")])
def test_era_for_version(version: str | None, era: str) -> None:
    assert era_for_version(version) is OllamaEra(era)


def test_unreadable_version_is_an_error() -> None:
    with pytest.raises(EstimateError, match="latest"):
        era_for_version("latest")
    with pytest.raises(EstimateError):
        era_for_version("build 7")


def test_fits_on_a_4090_with_32k_context() -> None:
    est = estimate(QWEN, LoadSettings(num_ctx=32768), RTX_4090)
    assert est.verdict == "fits" and est.processor == "100% GPU"
    assert "Fits" in est.explanation and "GiB" in est.explanation


def test_four_slots_of_32k_f16_spill_on_a_4090_and_q8_0_fits() -> None:
    f16 = estimate(QWEN, LoadSettings(num_ctx=32768, parallel=4), RTX_4090)
    assert f16.kv_bytes == 20 * GIB
    assert f16.verdict == "spills" and f16.layers_on_gpu < 41
    assert "CPU/GPU" in f16.processor and "several times slower" in f16.explanation
    q8 = estimate(QWEN, LoadSettings(num_ctx=32768, parallel=4, kv_cache_type="q8_0"), RTX_4090, ERA_RULES[OllamaEra.B])
    assert q8.verdict in ("fits", "tight") and q8.layers_on_gpu == 41


def test_era_c_keeps_llama_cpp_fit_margin() -> None:
    # with 0.5 GiB to spare era B loads every layer, but --fit's 1 GiB margin spills some in era C
    s = LoadSettings(num_ctx=32768, parallel=2)
    need = estimate(QWEN, s, GpuMemory(total_bytes=80 * GIB)).total_gpu_bytes
    gpu = GpuMemory(total_bytes=24564 * MIB, used_by_others_bytes=24564 * MIB - need - 512 * MIB)
    b, c = estimate(QWEN, s, gpu, ERA_RULES[OllamaEra.B]), estimate(QWEN, s, gpu, ERA_RULES[OllamaEra.C])
    assert b.layers_on_gpu == 41 and b.verdict == "tight"
    assert c.layers_on_gpu < 41 and c.verdict == "spills"


def test_long_prompt_without_flash_attention_is_tight_even_when_it_loads() -> None:
    s = LoadSettings(num_ctx=40960, flash_attention=False)
    probe = estimate(QWEN, s, GpuMemory(total_bytes=80 * GIB))
    free = probe.total_gpu_bytes + 512 * MIB  # loads with 0.5 GiB spare, the peak needs ~1.6 GiB more
    est = estimate(QWEN, s, GpuMemory(total_bytes=24564 * MIB, used_by_others_bytes=24564 * MIB - free), ERA_RULES[OllamaEra.B])
    assert est.layers_on_gpu == 41
    assert est.total_gpu_bytes <= est.available_bytes < est.peak_gpu_bytes
    assert est.verdict == "tight" and "long document" in est.explanation
    assert est.compute_flash_off_bytes > 10 * est.compute_flash_on_bytes


def test_forcing_all_layers_on_a_small_card_will_not_load() -> None:
    est = estimate(QWEN, LoadSettings(num_ctx=8192, num_gpu=999), GpuMemory(total_bytes=8 * GIB))
    assert est.verdict == "wont_load" and est.layers_on_gpu == 41
    assert "Won't load" in est.explanation


def test_era_a_uses_ollamas_legacy_estimate_for_placement() -> None:
    s = LoadSettings(num_ctx=32768, parallel=2)
    est = estimate(QWEN, s, RTX_4090, ERA_RULES[OllamaEra.A])
    assert est.legacy is not None and est.layers_on_gpu == est.legacy.layers
    # qwen3 falls to the default graph: GQA × KV / 6, far above the real compute buffer
    assert est.legacy.graph_full_bytes == (40 // 8) * est.legacy.kv_bytes // 6
    assert est.legacy.graph_full_bytes > 10 * est.compute_bytes
    assert est.verdict == "spills"  # the real need (~19 GiB) fits, but the legacy guess does not


def test_legacy_estimate_packs_everything_when_memory_is_ample() -> None:
    leg = legacy_estimate(QWEN, 4096, 512, 1, "f16", True, 80 * GIB)
    assert leg.layers == 41 and leg.vram_bytes == leg.total_bytes
    kv = 40 * 4096 * 8 * 256 * 2
    assert leg.kv_bytes == kv
    assert leg.vram_bytes == LEGACY_CUDA_MINIMUM_BYTES + QWEN.weights.layer_bytes[0] + kv // 40 + sum(
        QWEN.weights.layer_bytes) + kv + QWEN.weights.output_bytes + leg.graph_full_bytes


def test_legacy_llama_graph_formula() -> None:
    leg = legacy_estimate(LLAMA, 8192, 512, 1, "f16", False, 80 * GIB)
    e, v, h, c, b = 4096, 128256, 32, 8192, 512
    assert leg.graph_full_bytes == max(4 * b * (1 + 4 * e + c * (1 + h)), 4 * b * (e + v))


@pytest.mark.parametrize(("size", "vram", "text"), [(100, 100, "100% GPU"), (100, 0, "100% CPU"),
                                                    (100, 52, "48%/52% CPU/GPU"), (100, 200, "Unknown")])
def test_ps_processor_matches_ollama_ps(size: int, vram: int, text: str) -> None:
    assert ps_processor(size, vram) == text


@pytest.mark.parametrize(("change", "message"), [
    ({"num_ctx": 0}, "context length"), ({"num_ctx": 50000}, "training context 40960"),
    ({"parallel": 0}, "parallel"), ({"kv_cache_type": "q5_1"}, "q5_1"), ({"num_batch": 0}, "batch"),
    ({"num_batch": 256, "num_ubatch": 512}, "micro-batch 512"), ({"num_gpu": -1}, "num_gpu"),
    ({"gpu_overhead_bytes": -5}, "GPU overhead"),
])
def test_bad_settings_name_the_problem(change: dict, message: str) -> None:
    with pytest.raises(EstimateError, match=message):
        estimate(QWEN, LoadSettings(**{"num_ctx": 4096, **change}), RTX_4090)


@pytest.mark.parametrize(("gpu", "message"), [
    (GpuMemory(total_bytes=0), "GPU memory"), (GpuMemory(total_bytes=GIB, used_by_others_bytes=-1), "others"),
    (GpuMemory(total_bytes=GIB, used_by_others_bytes=2 * GIB), "exceeds"),
    (GpuMemory(total_bytes=GIB, runtime_overhead_bytes=-1), "runtime overhead"),
])
def test_bad_gpu_numbers_name_the_problem(gpu: GpuMemory, message: str) -> None:
    with pytest.raises(EstimateError, match=message):
        estimate(QWEN, LoadSettings(num_ctx=4096), gpu)


def test_default_runtime_overhead_is_for_consumer_cards() -> None:
    assert 300 * MIB <= DEFAULT_RUNTIME_OVERHEAD_BYTES <= 600 * MIB


# ---- laws ---------------------------------------------------------------------------------------
KV_ORDER = ("q4_0", "q8_0", "f16")
ctx_st = st.integers(min_value=1, max_value=40960)
par_st = st.integers(min_value=1, max_value=16)
fa_st = st.booleans()
shape_st = st.sampled_from([QWEN, GEMMA, LLAMA])


def _total(shape, ctx, par, kv="f16", fa=True) -> int:
    return estimate(shape, LoadSettings(num_ctx=ctx, parallel=par, kv_cache_type=kv, flash_attention=fa), H200)


@settings(max_examples=60, deadline=None)
@given(shape_st, ctx_st, ctx_st, par_st, fa_st)
def test_more_context_never_costs_less(shape, a: int, b: int, par: int, fa: bool) -> None:
    lo, hi = sorted((a, b))
    x, y = _total(shape, lo, par, fa=fa), _total(shape, hi, par, fa=fa)
    assert y.kv_bytes >= x.kv_bytes and y.compute_bytes >= x.compute_bytes
    assert y.total_gpu_bytes >= x.total_gpu_bytes and y.peak_gpu_bytes >= x.peak_gpu_bytes


@settings(max_examples=60, deadline=None)
@given(shape_st, st.integers(min_value=1, max_value=8192), par_st, par_st, fa_st)
def test_more_parallel_never_costs_less(shape, ctx: int, p: int, q: int, fa: bool) -> None:
    lo, hi = sorted((p, q))
    x, y = _total(shape, ctx, lo, fa=fa), _total(shape, ctx, hi, fa=fa)
    assert y.kv_bytes >= x.kv_bytes and y.total_gpu_bytes >= x.total_gpu_bytes
    assert y.peak_gpu_bytes >= x.peak_gpu_bytes


@settings(max_examples=60, deadline=None)
@given(shape_st, ctx_st, par_st)
def test_wider_kv_type_never_costs_less(shape, ctx: int, par: int) -> None:
    totals = [_total(shape, ctx, par, kv=kv) for kv in KV_ORDER]
    assert [t.kv_bytes for t in totals] == sorted(t.kv_bytes for t in totals)
    assert [t.total_gpu_bytes for t in totals] == sorted(t.total_gpu_bytes for t in totals)


@settings(max_examples=60, deadline=None)
@given(shape_st, ctx_st, par_st, st.sampled_from(KV_ORDER), fa_st, st.sampled_from([OllamaEra.B, OllamaEra.C]),
       st.integers(min_value=2, max_value=80), st.integers(min_value=1, max_value=80), st.booleans())
def test_verdict_is_monotone_in_gpu_size(shape, ctx, par, kv, fa, era, g1, g2, forced) -> None:
    small, big = sorted((g1, g2))
    s = LoadSettings(num_ctx=ctx, parallel=par, kv_cache_type=kv, flash_attention=fa, num_gpu=99 if forced else None)
    rank = {v: i for i, v in enumerate(VERDICTS[::-1])}  # wont_load < spills < tight < fits
    a = estimate(shape, s, GpuMemory(total_bytes=small * GIB), ERA_RULES[era])
    b = estimate(shape, s, GpuMemory(total_bytes=big * GIB), ERA_RULES[era])
    assert rank[b.verdict] >= rank[a.verdict]
    assert b.layers_on_gpu >= a.layers_on_gpu


@settings(max_examples=40, deadline=None)
@given(shape_st, ctx_st, par_st, st.sampled_from(KV_ORDER), fa_st, st.integers(min_value=4, max_value=48),
       st.sampled_from(list(OllamaEra)))
def test_parts_always_add_up(shape, ctx, par, kv, fa, gib, era) -> None:
    est = estimate(shape, LoadSettings(num_ctx=ctx, parallel=par, kv_cache_type=kv, flash_attention=fa),
                   GpuMemory(total_bytes=gib * GIB), ERA_RULES[era])
    assert est.total_gpu_bytes == est.weights_gpu_bytes + est.kv_gpu_bytes + est.compute_bytes + est.overhead_bytes
    assert est.kv_gpu_bytes <= est.kv_bytes and est.verdict in VERDICTS
    assert 0 <= est.layers_on_gpu <= est.layers_total
