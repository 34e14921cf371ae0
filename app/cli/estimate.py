"""Price a load setting in GPU memory: weights, KV cache, compute buffers, runtime, verdict.

Reads the model from a saved show reply (`ollama show --verbose` JSON; --show, --model-size) or from a running server
(--model, --url). What is priced is the launch the server really makes (the backend's planner, through the same
pricing.price_load as the Server page and the sweep): a knob left out is the server's own choice (its default
context, its automatic batch), a knob given is passed as a setting. Exit status 0 on any verdict, 2 when the
input is unusable.
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
from app.cli.runtime_allowance import runtime_allowance
from app.cli.checks import ArgProblem, Range, check_config_dir, check_ranges, check_text, one_line, read_text_file, server_url
from app.core.errors import DeckError, EstimateError, ModelNotFound
from app.core.memory.estimator import DEFAULT_RUNTIME_OVERHEAD_BYTES, GpuMemory, LoadRules, VramEstimate
from app.core.memory.launch_plan import LaunchPlan
from app.core.memory.llama_cpp import KV_TYPES
from app.core.memory.pricing import Priced, price_load
from app.core.server.settings import ServerSettings
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
    Range("--gpu-reserved-mib", 0, _TIB_MIB, "MiB", "memory the driver reserves on the GPU"),
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
    s.add_argument("--ctx", type=int, help="context tokens per request (num_ctx; default: the server's own "
                                           "default context for this model, version and GPU)")
    s.add_argument("--parallel", type=int, default=1, help="parallel request slots (the 'batch size')")
    s.add_argument("--kv-cache", choices=KV_TYPES, default="f16", help="KV cache type")
    s.add_argument("--flash-attention", choices=("on", "off", "auto"),
                   help="default: auto, the server decides (priced as on)")
    s.add_argument("--batch", type=int, help="num_batch (default: the server's own; Ollama >= 0.30 picks "
                                             "-b 512/1024/2048 by context and free VRAM)")
    s.add_argument("--ubatch", type=int, help="micro-batch (default: the server's own)")
    s.add_argument("--num-gpu", type=int, help="force this many layers onto the GPU")
    s.add_argument("--gpu-overhead-mib", type=float, default=0.0, help="GPU memory the server leaves free, in MiB")
    g = parser.add_argument_group("GPU")
    g.add_argument("--gpu-total-mib", type=float, default=RTX_4090_MIB, help=f"GPU memory (default {RTX_4090_MIB}, an RTX 4090)")
    g.add_argument("--gpu-used-mib", type=float, default=0.0, help="memory used by other processes")
    g.add_argument("--gpu-reserved-mib", type=float, default=0.0,
                   help="memory the driver reserves, which no process can have (default 0). nvidia-smi's "
                        "\"used\" leaves it out: NVML's memory info v2 reports it as \"reserved\" (about 614 MiB "
                        "on an H200), so with --gpu-used-mib read from nvidia-smi pass it here, or the layers on "
                        "the GPU come out one too many")
    g.add_argument("--runtime-overhead-mib", type=float,
                   help="CUDA context/runtime per process (default: the figure learnt on this machine's GPU when the "
                        f"card priced is that GPU, else {DEFAULT_RUNTIME_OVERHEAD_BYTES / MIB:.0f}; an H200 measured "
                        "~590)")
    g.add_argument("--config-dir", metavar="DIR",
                   help="the folder the learnt runtime figures are kept in (default: the user config folder)")
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


def _inputs(args: argparse.Namespace) -> tuple[ModelFacts, int, str | None]:
    """(the model's facts, its size on disk, the server version) from --show or --model."""
    if args.model and args.show:
        raise EstimateError("give either --show or --model, not both")
    url = server_url("--url", args.url or DEFAULT_URL).base_url
    if args.model:
        facts, size, version = asyncio.run(_fetch(url, args.model, chosen_backend(args)))
        return facts, size, args.server_version or version
    if not args.show:
        raise EstimateError("no model given", "Pass --show SHOW.json --model-size BYTES, or --model NAME.")
    if args.model_size is None:
        raise EstimateError("--show needs --model-size BYTES", "Use the model's `size` in bytes from the server's model list.")
    # A saved show reply is Ollama's JSON: its parser is the Ollama backend's.
    return facts_from_saved_show(_load_show(args.show)), args.model_size, args.server_version


def _settings(args: argparse.Namespace, backend: str) -> ServerSettings:
    """The knobs given, as the server settings the planner reads; those left out are the server's to choose."""
    settings = ServerSettings(num_parallel=args.parallel, context_length=args.ctx, kv_cache_type=args.kv_cache,
                              flash_attention=args.flash_attention or "auto", batch_size=args.batch,
                              micro_batch_size=args.ubatch, backend=backend)
    # the servers' setting is whole MiB (OLLAMA_GPU_OVERHEAD is read as such by the planner and the form)
    return settings.with_options(gpu_overhead_mib=round(args.gpu_overhead_mib) or None)


def _gpu(args: argparse.Namespace) -> GpuMemory:
    """The GPU priced against, from the flags: its size, what others use, the driver's reserve, the runtime
    allowance (given; else the one learnt on this machine's GPU when the card priced is that GPU; else the
    default)."""
    check_config_dir("--config-dir", args.config_dir)
    allowance = runtime_allowance(args.runtime_overhead_mib, args.gpu_total_mib, args.config_dir)
    return GpuMemory.with_allowance(int(args.gpu_total_mib * MIB), int(args.gpu_used_mib * MIB),
                                    reserved_bytes=int(args.gpu_reserved_mib * MIB), allowance=allowance)


def _price(args: argparse.Namespace, backend: str) -> tuple[ModelShape, Priced]:
    """The model and its one price (pricing.price_load) for the flags."""
    facts, size, version = _inputs(args)
    shape = facts.shape(size)
    if args.ctx is not None and shape.context_length and args.ctx > shape.context_length:
        # the server would clamp it; asked for explicitly, it is a mistake to name
        raise EstimateError(f"context {args.ctx} is above the model's training context {shape.context_length}")
    from app.backends import registry

    planner = registry.get(backend).planner
    # the model's own num_ctx/num_batch where it sets them and the flag does not (a flag is the request's own)
    priced = price_load(planner, _settings(args, backend), shape, _gpu(args), version, size_bytes=size,
                        model_num_ctx=None if args.ctx is not None else facts.own_context,
                        model_num_batch=None if args.batch is not None else facts.own_batch,
                        model_num_gpu=args.num_gpu, context_setting="--ctx")
    return shape, priced


def _mib(n: int) -> tuple[str, str]:
    return f"{n / MIB:10.1f}", f"{n / GIB:7.2f}"


def render_table(shape: ModelShape, plan: LaunchPlan, est: VramEstimate, backend: str = "ollama") -> str:
    """Readable, aligned text report of the launch `backend`'s server makes and its price."""
    rules = plan.rules
    load = plan.load_settings()
    fa = {"auto": "auto (priced as on)"}.get(plan.flash_attention, plan.flash_attention)
    lines = [
        f"model      {shape.architecture}, {shape.n_layer} layers, {shape.quantization}"
        f" ({'tensor list' if shape.weights.from_tensors else 'split from file size'})",
        f"setting    ctx {plan.num_ctx} x {plan.parallel} slot(s), KV {est.kv_cache_type},"
        f" flash attention {fa}, batch {load.num_batch}/{load.ubatch}",
        f"context    {plan.num_ctx} per slot: {plan.context_source}",
        f"batch      {plan.num_batch}: {plan.batch_source}",
        f"{backend:10} {rules.description}",
        f"runtime    {est.allowance.describe()}",
    ]
    if plan.launch_lines:
        lines += ["launch     " + plan.launch_lines[0], *("           " + line for line in plan.launch_lines[1:])]
    lines += ["", f"{'':22}{'MiB':>10} {'GiB':>7}"]
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
    lines += [f"note: {n}" for n in (*plan.notes, *est.notes)]
    return "\n".join(lines)


def plan_json(plan: LaunchPlan) -> dict[str, Any]:
    """The launch priced, JSON-ready: per-slot context and batch with where each comes from, the command."""
    load = plan.load_settings()
    return {"num_ctx": plan.num_ctx, "context_source": plan.context_source, "parallel": plan.parallel,
            "ctx_total": plan.ctx_total, "num_batch": plan.num_batch, "num_ubatch": load.ubatch,
            "batch_source": plan.batch_source, "flash_attention": plan.flash_attention,
            "kv_cache_type": plan.kv_cache_type, "num_gpu": plan.num_gpu,
            "gpu_overhead_bytes": plan.gpu_overhead_bytes, "launch_lines": list(plan.launch_lines),
            "notes": list(plan.notes)}


def to_json(est: VramEstimate, rules: LoadRules = LoadRules(), plan: LaunchPlan | None = None) -> dict[str, Any]:
    """The estimate as a JSON-ready dict; "era" is the label of the server's placement rules, "plan" the
    launch priced (when given)."""
    data = {"era": rules.label, **asdict(est)}
    data["notes"] = list(est.notes)
    if plan is not None:
        data["plan"] = plan_json(plan)
    data["allowance"] = {**asdict(est.allowance), "source": est.allowance.source.value,
                         "described": est.allowance.describe()}
    return data


def run(args: argparse.Namespace) -> int:
    """Execute `ollama-deck estimate`; 0 on success, 2 on unusable input."""
    try:
        check_ranges(args, RANGES)
        check_text("--model", args.model, empty_ok=False)
        check_text("--show", args.show, empty_ok=False)
        backend = chosen_backend(args)
        shape, priced = _price(args, backend)
    except ArgProblem as exc:
        print(f"ollama-deck estimate: {one_line(str(exc))}", file=sys.stderr)
        return 2
    except DeckError as exc:
        print(f"ollama-deck estimate: {one_line(exc.user_text())}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(to_json(priced.estimate, priced.plan.rules, priced.plan), indent=1))
    else:
        print(render_table(shape, priced.plan, priced.estimate, backend))
    return 0
