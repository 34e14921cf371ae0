"""The /metrics dialects of vLLM, SGLang, TGI and llama.cpp read into ServerReading, on the expositions of
tests/data/openai/ (written from each server's source: see write_expositions.py there) and on the
exposition recorded from the real llama-server (tests/data/llama_server/metrics_busy.txt)."""

from __future__ import annotations

import pytest

from app.backends.openai.metrics import (
    MetricsDialect,
    detect_dialect,
    metrics_root,
    parse_exposition,
    read_exposition,
)

from tests.backends.openai.exposition_server import served


def exposition(name: str) -> str:
    return served(name).decode()


def test_vllm_idle_one_engine_with_the_newer_kv_name() -> None:
    scrape = read_exposition(exposition("openai/vllm_idle.txt"), at=5.0)
    r = scrape.reading
    assert scrape.dialect is MetricsDialect.VLLM and scrape.summary == "vLLM metrics"
    assert (r.at, r.requests_processing, r.requests_deferred, r.kv_cache_ratio) == (5.0, 0, 0, 0.0)
    assert (r.prompt_tokens_total, r.predicted_tokens_total, r.requests_finished_total) == (18432, 40960, 80)
    assert r.slots is None and r.skipped_lines == 0 and r.metrics_reason == ""
    assert scrape.models == ("Qwen/Qwen3-8B",) and scrape.engines == ("0",)


def test_vllm_busy_two_engines_summed_and_their_kv_fill_averaged() -> None:
    text = exposition("openai/vllm_busy.txt")
    assert "vllm:gpu_cache_usage_perc{" in text and "vllm:kv_cache_usage_perc{" in text
    scrape = read_exposition(text, at=0.0)
    r = scrape.reading
    assert (r.requests_processing, r.requests_deferred) == (12 + 11, 3 + 2)
    assert r.kv_cache_ratio == pytest.approx((0.375 + 0.625) / 2)
    assert (r.prompt_tokens_total, r.predicted_tokens_total) == (51200 + 49152, 102400 + 98304)
    assert r.requests_finished_total == 190 + 14 + 1 + 181 + 17 + 0  # every finished_reason, both engines
    assert scrape.engines == ("0", "1") and scrape.summary == "vLLM metrics, summed over 2 engines"


def test_vllm_before_0_9_reports_kv_under_the_older_name_only() -> None:
    lines = exposition("openai/vllm_busy.txt").splitlines()
    text = "\n".join(line for line in lines if "kv_cache_usage_perc" not in line)
    assert read_exposition(text, at=0.0).reading.kv_cache_ratio == pytest.approx(0.5)


def test_vllm_with_several_model_names_sums_them_and_says_so() -> None:
    text = """# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="base"} 2.0
vllm:num_requests_running{engine="0",model_name="base-lora"} 3.0
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="base"} 10.0
vllm:generation_tokens_total{engine="0",model_name="base-lora"} 5.0
"""
    scrape = read_exposition(text, at=0.0)
    assert (scrape.reading.requests_processing, scrape.reading.predicted_tokens_total) == (5, 15)
    assert scrape.reading.prompt_tokens_total is None and scrape.reading.kv_cache_ratio is None
    assert scrape.summary == "vLLM metrics, summed over 2 models (base, base-lora)"


def test_sglang() -> None:
    scrape = read_exposition(exposition("openai/sglang_busy.txt"), at=0.0)
    r = scrape.reading
    assert scrape.dialect is MetricsDialect.SGLANG and scrape.summary == "SGLang metrics"
    assert (r.requests_processing, r.requests_deferred, r.kv_cache_ratio) == (6, 2, 0.25)
    assert (r.prompt_tokens_total, r.predicted_tokens_total, r.requests_finished_total) == (30720, 65536, 128)


def test_tgi_tokens_from_its_histograms_sums() -> None:
    scrape = read_exposition(exposition("openai/tgi_busy.txt"), at=0.0)
    r = scrape.reading
    assert scrape.dialect is MetricsDialect.TGI
    assert (r.requests_processing, r.requests_deferred, r.kv_cache_ratio) == (8, 4, None)
    assert r.prompt_tokens_total == sum(300 + 7 * i for i in range(104)) == 68692
    assert r.predicted_tokens_total == sum(256 + (i % 4) * 128 for i in range(96)) == 43008
    assert r.requests_finished_total == 96


def test_tgi_counter_without_its_type_line_is_still_read() -> None:
    assert read_exposition("tgi_request_success 7\ntgi_queue_size 1\n", at=0.0).reading.requests_finished_total == 7


def test_llama_cpp_recorded_from_the_real_llama_server() -> None:
    scrape = read_exposition(exposition("llama_server/metrics_busy.txt"), at=0.0)
    r = scrape.reading
    assert scrape.dialect is MetricsDialect.LLAMA_CPP and scrape.summary == "llama.cpp metrics"
    assert (r.requests_processing, r.requests_deferred, r.kv_cache_ratio) == (2, 1, None)
    assert (r.prompt_tokens_total, r.predicted_tokens_total, r.requests_finished_total) == (41, 0, None)


def test_unknown_metrics_read_as_no_figures_with_the_reason() -> None:
    scrape = read_exposition("# TYPE go_goroutines gauge\ngo_goroutines 12\n", at=0.0)
    assert scrape.dialect is MetricsDialect.UNKNOWN and scrape.summary == "unrecognised metrics"
    assert scrape.reading.requests_processing is None
    assert "vLLM, SGLang, TGI or llama.cpp" in scrape.reading.metrics_reason


def test_the_dialect_is_the_one_with_most_names_present() -> None:
    text = exposition("openai/vllm_idle.txt") + "llamacpp:requests_processing 1\n"
    assert detect_dialect(parse_exposition(text)) is MetricsDialect.VLLM


def test_one_bad_line_is_skipped_and_counted_the_rest_kept() -> None:
    lines = exposition("openai/vllm_busy.txt").splitlines()
    at = lines.index('vllm:num_requests_waiting{engine="1",model_name="Qwen/Qwen3-8B"} 2.0')
    lines.insert(at, 'vllm:num_requests_waiting{engine="2" 7.0')  # unclosed labels: the library rejects the text
    lines.insert(3, "garbage line with words")
    scrape = read_exposition("\n".join(lines), at=0.0)
    assert scrape.reading.skipped_lines == 2
    assert scrape.reading.requests_deferred == 5 and scrape.reading.requests_finished_total == 403
    assert scrape.reading.predicted_tokens_total == 102400 + 98304


def test_nan_and_infinite_values_are_not_figures() -> None:
    text = "vllm:num_requests_running{engine=\"0\"} NaN\nvllm:num_requests_waiting{engine=\"0\"} +Inf\n"
    reading = read_exposition(text, at=0.0).reading
    assert reading.requests_processing is None and reading.requests_deferred is None


@pytest.mark.parametrize(("url", "root"), [
    ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000"), ("http://127.0.0.1:8000/v1/", "http://127.0.0.1:8000"),
    ("https://box:8443/", "https://box:8443"), ("http://h:1/api/v1", "http://h:1/api"),
    ("http://h:1/v10", "http://h:1/v10"),
])
def test_metrics_root_drops_the_openai_v1_suffix(url: str, root: str) -> None:
    assert metrics_root(url) == root
