"""Write the vLLM and SGLang `/metrics` expositions of this folder from their sources' metric definitions.

These are NOT recordings of a running server: vLLM and SGLang need a GPU and cannot run here. Both
servers expose their metrics through prometheus_client, so this script declares the same metrics
(names, help texts, label names, types) with the same library and writes its text exposition, with
figures chosen for the tests. The definitions were read from:

- vLLM: vllm/v1/metrics/loggers.py (PrometheusStatLogger), vllm-project/vllm commit
  005a810bc40faa25b8870fbc8559c3462581eee3; labels model_name and engine on every metric, and
  finished_reason (str of vllm.v1.engine's finish reason: stop, length, abort) on request_success.
  `vllm:gpu_cache_usage_perc` is the name before 0.9 (kept, deprecated, until 0.10),
  `vllm:kv_cache_usage_perc` the name since: the idle file has only the newer one, the busy file
  (two engines, data parallel) both.
- SGLang: python/sglang/srt/metrics/collector.py (SchedulerMetricsCollector, TokenizerMetricsCollector),
  sgl-project/sglang commit 00ae9c1590d2d0bb6c0bfff39e312c34ae3dd538; scheduler labels from
  python/sglang/srt/managers/scheduler_metrics_mixin.py (model_name, engine_type, tp_rank, pp_rank),
  tokenizer labels model_name.

- TGI: its router exposes metrics through the Rust crate metrics-exporter-prometheus 0.15 (not
  prometheus_client), so `tgi()` below writes that crate's text format itself (HELP and TYPE lines,
  a blank line after each metric, counters then gauges then histograms, by name). Names, help texts
  and bucket layouts from huggingface/text-generation-inference commit
  db931fcf42da018a3657580c64bf2720f167f9ab: router/src/server.rs (tgi_request_count, tgi_request_success,
  tgi_request_generated_tokens, the PrometheusBuilder's buckets, the describe_* help texts),
  router/src/validation.rs (tgi_request_input_length, recorded when a request is validated),
  backends/v3/src/queue.rs (tgi_queue_size), backends/v3/src/backend.rs (tgi_batch_current_size).

Run from the repository root:  PYTHONPATH=$PWD python tests/data/openai/write_expositions.py"""

from __future__ import annotations

from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

HERE = Path(__file__).resolve().parent
VLLM_MODEL = "Qwen/Qwen3-8B"
SGLANG_MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def vllm(engines: dict[str, dict[str, float]], *, old_kv_name: bool) -> bytes:
    """vLLM's exposition with one label set per engine index; figures keyed as below."""
    registry = CollectorRegistry()
    labels = ["model_name", "engine"]

    def gauge(name: str, doc: str) -> Gauge:
        return Gauge(name, doc, labels, registry=registry)

    def counter(name: str, doc: str, extra: tuple[str, ...] = ()) -> Counter:
        return Counter(name, doc, [*labels, *extra], registry=registry)

    running = gauge("vllm:num_requests_running", "Number of requests in model execution batches.")
    waiting = gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.")
    old_kv = gauge("vllm:gpu_cache_usage_perc", "GPU KV-cache usage. 1 means 100 percent usage."
                   "DEPRECATED: Use vllm:kv_cache_usage_perc instead.") if old_kv_name else None
    kv = gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.")
    preempted = counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.")
    prompt = counter("vllm:prompt_tokens", "Number of prefill tokens processed.")
    generated = counter("vllm:generation_tokens", "Number of generation tokens processed.")
    success = counter("vllm:request_success", "Count of successfully processed requests.", ("finished_reason",))
    ttft = Histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", labels,
                     buckets=[0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
                              7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0], registry=registry)
    for engine, f in engines.items():
        key = (VLLM_MODEL, engine)
        running.labels(*key).set(f["running"])
        waiting.labels(*key).set(f["waiting"])
        if old_kv is not None:
            old_kv.labels(*key).set(f["kv"])
        kv.labels(*key).set(f["kv"])
        preempted.labels(*key).inc(0)
        prompt.labels(*key).inc(f["prompt"])
        generated.labels(*key).inc(f["generated"])
        for reason in ("stop", "length", "abort"):
            success.labels(*key, reason).inc(f[reason])
        for seconds in (0.05, 0.3) if f["stop"] else ():
            ttft.labels(*key).observe(seconds)
    return generate_latest(registry)


def sglang(f: dict[str, float]) -> bytes:
    """SGLang's exposition: one scheduler (tp 0, pp 0) and its tokenizer manager."""
    registry = CollectorRegistry()
    sched = {"model_name": SGLANG_MODEL, "engine_type": "unified", "tp_rank": "0", "pp_rank": "0"}

    def gauge(name: str, doc: str, value: float) -> None:
        Gauge(name, doc, list(sched), registry=registry, multiprocess_mode="mostrecent").labels(**sched).set(value)

    def counter(name: str, doc: str, value: float) -> None:
        Counter(name, doc, ["model_name"], registry=registry).labels(SGLANG_MODEL).inc(value)

    gauge("sglang:num_running_reqs", "The number of running requests.", f["running"])
    gauge("sglang:num_used_tokens", "The number of used tokens.", f["used_tokens"])
    gauge("sglang:token_usage", "The token usage.", f["token_usage"])
    gauge("sglang:gen_throughput", "The generation throughput (token/s).", f["gen_throughput"])
    gauge("sglang:num_queue_reqs", "The number of requests in the waiting queue.", f["queue"])
    gauge("sglang:cache_hit_rate", "The prefix cache hit rate.", 0.0)
    gauge("sglang:max_total_num_tokens", "Maximum total number of tokens in the KV cache pool.", 412000)
    counter("sglang:prompt_tokens_total", "Number of prefill tokens processed.", f["prompt"])
    counter("sglang:generation_tokens_total", "Number of generation tokens processed.", f["generated"])
    counter("sglang:cached_tokens_total", "Number of cached prompt tokens.", 0)
    counter("sglang:num_requests_total", "Number of requests processed.", f["requests"])
    counter("sglang:num_aborted_requests_total", "Number of requests aborted.", 0)
    return generate_latest(registry)


VLLM_IDLE = {"0": {"running": 0, "waiting": 0, "kv": 0.0, "prompt": 18432, "generated": 40960,
                   "stop": 71, "length": 9, "abort": 0}}
VLLM_BUSY = {"0": {"running": 12, "waiting": 3, "kv": 0.375, "prompt": 51200, "generated": 102400,
                   "stop": 190, "length": 14, "abort": 1},
             "1": {"running": 11, "waiting": 2, "kv": 0.625, "prompt": 49152, "generated": 98304,
                   "stop": 181, "length": 17, "abort": 0}}
SGLANG_BUSY = {"running": 6, "queue": 2, "used_tokens": 103000, "token_usage": 0.25, "gen_throughput": 812.5,
               "prompt": 30720, "generated": 65536, "requests": 128}


def _tgi_histogram(name: str, doc: str, buckets: list[float], values: list[float]) -> list[str]:
    lines = [f"# HELP {name} {doc}", f"# TYPE {name} histogram"]
    lines += [f'{name}_bucket{{le="{b:g}"}} {sum(1 for v in values if v <= b)}' for b in buckets]
    lines += [f'{name}_bucket{{le="+Inf"}} {len(values)}', f"{name}_sum {sum(values):g}", f"{name}_count {len(values)}"]
    return lines


def tgi(f: dict[str, float], input_lengths: list[float], generated: list[float]) -> bytes:
    """TGI's router exposition (metrics-exporter-prometheus): max_input_tokens 4096, max_total_tokens 8192."""
    blocks = [
        ["# HELP tgi_request_count Total number of requests", "# TYPE tgi_request_count counter",
         f"tgi_request_count {f['count']:g}"],
        ['# TYPE tgi_request_failure counter', f'tgi_request_failure{{err="validation"}} {f["failed"]:g}'],
        ["# HELP tgi_request_success Number of successful requests", "# TYPE tgi_request_success counter",
         f"tgi_request_success {len(generated)}"],
        ["# HELP tgi_batch_current_max_tokens Maximum tokens for the current batch",
         "# TYPE tgi_batch_current_max_tokens gauge", f"tgi_batch_current_max_tokens {f['batch_tokens']:g}"],
        ["# HELP tgi_batch_current_size Current batch size", "# TYPE tgi_batch_current_size gauge",
         f"tgi_batch_current_size {f['batch']:g}"],
        ["# TYPE tgi_batch_max_total_tokens gauge", "tgi_batch_max_total_tokens 262144"],
        ["# HELP tgi_queue_size Current queue size", "# TYPE tgi_queue_size gauge", f"tgi_queue_size {f['queue']:g}"],
        _tgi_histogram("tgi_request_generated_tokens", "Generated tokens per request",
                       [8192 / 100 * (x + 1) for x in range(100)], generated),
        _tgi_histogram("tgi_request_input_length", "Input token length per request",
                       [4096 / 100 * (x + 1) for x in range(100)], input_lengths),
    ]
    return "".join("\n".join(block) + "\n\n" for block in blocks).encode()


# 104 requests validated (their input lengths recorded), 96 finished, 8 decoding in the batch, 4 queued.
TGI_BUSY = {"count": 109, "failed": 1, "batch": 8, "batch_tokens": 9216, "queue": 4}
TGI_INPUTS = [float(300 + 7 * i) for i in range(104)]
TGI_GENERATED = [float(256 + (i % 4) * 128) for i in range(96)]


def main() -> None:
    for name, body in (("vllm_idle.txt", vllm(VLLM_IDLE, old_kv_name=False)),
                       ("vllm_busy.txt", vllm(VLLM_BUSY, old_kv_name=True)),
                       ("sglang_busy.txt", sglang(SGLANG_BUSY)),
                       ("tgi_busy.txt", tgi(TGI_BUSY, TGI_INPUTS, TGI_GENERATED))):
        (HERE / name).write_bytes(body)
        print(f"{name}: {len(body)} bytes")


if __name__ == "__main__":
    main()
