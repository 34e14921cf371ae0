"""Price a load setting in GPU memory: weights, KV cache, compute buffers, runtime, verdict.

Reads the model from a saved show reply (`ollama show --verbose` JSON; --show, --model-size) or from a running server
(--model, --url). Exit status 0 on any verdict, 2 when the input is unusable.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import asdict
from typing import Any

from app.backends.ollama.show import facts_from_saved_show
from app.cli.backend_arg import add_backend_argument, chosen_backend
from app.cli.checks import ArgProblem, Range, check_ranges, check_text, one_line, read_text_file, server_url
from app.core.errors import DeckError, EstimateError, ModelNotFound
from app.core.memory.estimator import (DEFAULT_RUNTIME_OVERHEAD_BYTES, GpuMemory, LoadRules, LoadSettings,
                                VramEstimate, estimate)
from app.core.memory.llama_cpp import KV_TYPES
from app.core.memory.verdict import verdict_label
from app.core.units import GIB, MIB
from app.core.model_facts import ModelFacts
from app.core.model_shape import ModelShape

DEFAULT_URL = "http://127.0.0.1:11434"
RTX_4090_MIB = 24564  # what nvidia-smi reports for a 24 GB RTX 4090
_TIB_MIB = 1 << 20  # 1 TiB in MiB: no GPU holds more
RANGES = (
    Range("--model-size", 1, 1 << 50, "bytes", "the model size on disk, as the server's model list gives it"),
    Range("--ctx", 1, 1 << 24, "tokens", "num_ctx per request; no model is trained on more than 2^24"),
    Range("--parallel", 1, 256, "slots", "requests served at once, each with its own context"),
    Range("--batch", 1, 1 << 20, "tokens", "prompt tokens processed per step"),
    Range("--ubatch", 1, 1 << 20, "tokens", "prompt tokens per GPU step, at most --batch"),
    Range("--num-gpu", 0, 4097, "layers", "layers placed on the GPU; no model has more than 4096"),
    Range("--gpu-overhead-mib", 0, _TIB_MIB, "MiB", "memory the server keeps free, at most a GPU's size"),
    Range("--gpu-total-mib", 0, _TIB_MIB, "MiB", "the GPU's memory; no GPU has more than 1 TiB", above=True),
    Range("--gpu-used-mib", 0, _TIB_MIB, "MiB", "memory other processes use on the GPU"),
    Range("--runtime-overhead-mib", 0, 65536, "MiB", "the CUDA context per process, about 300-600 MiB"),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Fill the `estimate` parser."""
    src = parser.add_argument_group("model (one of)")
    src.add_argument("--show", metavar="SHOW.json", help="a saved show reply, the JSON of the server's model metadata (verbose gives exact tensor sizes)")
    src.add_argument("--model-size", metavar="BYTES", type=int, help="size on disk in bytes (with --show)")
    src.add_argument("--model", metavar="NAME", help="read the model from a running server instead")
    src.add_argument("--url", help=f"server for --model (default {DEFAULT_URL})")
    add_backend_argument(src)
    s = parser.add_argument_group("settings")
    s.add_argument("--ctx", type=int, required=True, help="context tokens per request (num_ctx)")
    s.add_argument("--parallel", type=int, default=1, help="parallel request slots (the 'batch size')")
    s.add_argument("--kv-cache", choices=KV_TYPES, default="f16", help="KV cache type")
    s.add_argument("--flash-attention", choices=("on", "off"), default="on")
    s.add_argument("--batch", type=int, default=512, help="num_batch (default 512)")
    s.add_argument("--ubatch", type=int, help="micro-batch (default: equal to --batch, as Ollama passes it)")
    s.add_argument("--num-gpu", type=int, help="force this many layers onto the GPU")
    s.add_argument("--gpu-overhead-mib", type=float, default=0.0, help="GPU memory the server leaves free, in MiB")
    g = parser.add_argument_group("GPU")
    g.add_argument("--gpu-total-mib", type=float, default=RTX_4090_MIB, help=f"GPU memory (default {RTX_4090_MIB}, an RTX 4090)")
    g.add_argument("--gpu-used-mib", type=float, default=0.0, help="memory used by other processes")
    g.add_argument("--runtime-overhead-mib", type=float, default=DEFAULT_RUNTIME_OVERHEAD_BYTES / MIB,
                   help="CUDA context/runtime per process (default %(default).0f; an H200 measured ~590)")
    parser.add_argument("--server-version", "--ollama-version", dest="server_version",
                        help="e.g. 0.11.10 (default: the server's with --model, else current)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


async def _fetch(url: str, name: str, backend: str = "ollama") -> tuple[ModelFacts, int, str]:
    """(model facts, size on disk, version) of `name` from a live server."""
    from app.backends import registry
    from app.cli.server_reply import require_reply

    async with registry.get(backend).catalog(url) as client:
        version = await require_reply(client, url)  # a hung server is named in seconds, not minutes
        details = await client.show(name, verbose=True)
        local = await client.tags()
    wanted = {name, name if ":" in name else f"{name}:latest"}
    sizes = [m.size_bytes for m in local if m.name in wanted or m.model in wanted]
    if not sizes:
        raise ModelNotFound(f"model '{name}' not found among the server's local models")
    return details.facts, sizes[0], version


def _load_show(path: str) -> dict[str, Any]:
    try:
        text = read_text_file("--show", path, "the JSON of the server's show reply")
    except ArgProblem as exc:
        hint = "Save the server's show reply for the model there first." if "no such file" in str(exc) else None
        raise EstimateError(str(exc), hint) from None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:  # RecursionError: JSON nested thousands deep
        raise EstimateError(f"cannot read {path} as JSON: {str(exc)[:120]}") from None
    if not isinstance(data, dict):
        raise EstimateError(f"{path} is not a JSON object like a show reply")
    return data


def _inputs(args: argparse.Namespace) -> tuple[ModelShape, str | None]:
    if args.model and args.show:
        raise EstimateError("give either --show or --model, not both")
    url = server_url("--url", args.url or DEFAULT_URL).base_url
    if args.model:
        facts, size, version = asyncio.run(_fetch(url, args.model, chosen_backend(args)))
        return facts.shape(size), args.server_version or version
    if not args.show:
        raise EstimateError("no model given", "Pass --show SHOW.json --model-size BYTES, or --model NAME.")
    if args.model_size is None:
        raise EstimateError("--show needs --model-size BYTES", "Use the model's `size` in bytes from the server's model list.")
    # A saved show reply is Ollama's JSON: its parser is the Ollama backend's.
    return facts_from_saved_show(_load_show(args.show)).shape(args.model_size), args.server_version


def _mib(n: int) -> tuple[str, str]:
    return f"{n / MIB:10.1f}", f"{n / GIB:7.2f}"


def render_table(shape: ModelShape, settings: LoadSettings, est: VramEstimate, rules: LoadRules = LoadRules(),
                 backend: str = "ollama") -> str:
    """Readable, aligned text report; `rules` are how the `backend`'s server places layers."""
    fa = "on" if settings.flash_attention else "off"
    lines = [
        f"model      {shape.architecture}, {shape.n_layer} layers, {shape.quantization}"
        f" ({'tensor list' if shape.weights.from_tensors else 'split from file size'})",
        f"setting    ctx {settings.num_ctx} x {settings.parallel} slot(s), KV {est.kv_cache_type},"
        f" flash attention {fa}, batch {settings.num_batch}/{settings.ubatch}",
        f"{backend:10} {rules.description}",
        "",
        f"{'':22}{'MiB':>10} {'GiB':>7}",
    ]
    rows = [("weights on GPU", est.weights_gpu_bytes), ("weights in RAM", est.weights_cpu_bytes),
            ("KV cache on GPU", est.kv_gpu_bytes), ("compute buffers", est.compute_bytes),
            ("runtime (CUDA)", est.overhead_bytes), ("total at load", est.total_gpu_bytes),
            ("peak, long prompt", est.peak_gpu_bytes), (f"free for {rules.server_name}", est.available_bytes),
            ("headroom at peak", est.headroom_bytes)]
    lines += [f"{label:22}{m} {g}" for label, n in rows for m, g in [_mib(n)]]
    lines += [
        f"{'compute if FA on/off':22}{est.compute_flash_on_bytes / MIB:10.1f} / {est.compute_flash_off_bytes / MIB:.1f} MiB",
        f"{'layers on GPU':22}{est.layers_on_gpu:>7}/{est.layers_total}",
        f"{'ollama ps':22}{est.processor}",
    ]
    if est.legacy is not None:
        lines.append(f"{'Ollama own estimate':22}{est.legacy.total_bytes / MIB:10.1f} MiB total,"
                     f" {est.legacy.vram_bytes / MIB:.1f} MiB on GPU, {est.legacy.layers}/{est.legacy.layers_model} layers")
    lines += [f"{'verdict':22}{verdict_label(est.verdict)}", "", est.explanation]
    lines += [f"note: {n}" for n in est.notes]
    return "\n".join(lines)


def to_json(est: VramEstimate, rules: LoadRules = LoadRules()) -> dict[str, Any]:
    """The estimate as a JSON-ready dict; "era" is the label of the server's placement rules."""
    data = {"era": rules.label, **asdict(est)}
    data["notes"] = list(est.notes)
    return data


def run(args: argparse.Namespace) -> int:
    """Execute `ollama-deck estimate`; 0 on success, 2 on unusable input."""
    try:
        check_ranges(args, RANGES)
        check_text("--model", args.model, empty_ok=False)
        check_text("--show", args.show, empty_ok=False)
        shape, version = _inputs(args)
        from app.backends import registry

        backend = chosen_backend(args)
        rules = registry.get(backend).planner.rules(version)
        settings = LoadSettings(
            num_ctx=args.ctx, parallel=args.parallel, kv_cache_type=args.kv_cache,
            flash_attention=args.flash_attention == "on", num_batch=args.batch, num_ubatch=args.ubatch,
            num_gpu=args.num_gpu, gpu_overhead_bytes=int(args.gpu_overhead_mib * MIB))
        gpu = GpuMemory(total_bytes=int(args.gpu_total_mib * MIB), used_by_others_bytes=int(args.gpu_used_mib * MIB),
                        runtime_overhead_bytes=int(args.runtime_overhead_mib * MIB))
        est = estimate(shape, settings, gpu, rules)
    except ArgProblem as exc:
        print(f"ollama-deck estimate: {one_line(str(exc))}", file=sys.stderr)
        return 2
    except DeckError as exc:
        print(f"ollama-deck estimate: {one_line(exc.user_text())}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(to_json(est, rules), indent=1))
    else:
        print(render_table(shape, settings, est, rules, backend))
    return 0
