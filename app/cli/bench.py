"""Measure throughput and latency per setting and recommend one: the articles' table, on your GPU.

Without --managed the server at --url is used as it runs, and only the client side varies
(--concurrency). With --managed, ollama-deck starts its own `ollama serve` and restarts it for
every --parallel (and --kv-cache, --context, --flash-attention) value, then stops it again.
Prints the table and the recommendation; --json/--csv/--markdown write the results (- for stdout).
With --compare (managed servers only) the server's own default settings are measured too and reported
against the recommended setting (--compare-report writes that report alone: .md, .csv, .json or .png).
Exit status: 0 when the sweep ran, 1 when no point could be measured or the server could not be
used, 2 on unusable input, 130 when interrupted. A run the benchmark history cannot keep (locked by another
program, a full disk) is still printed and written; what the history kept of it is said on stderr after it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from app import __version__
from app.adapters.storage.allowance_store import AllowanceStore
from app.services.runtime_learner import RuntimeLearner
from app.cli.backend_arg import add_backend_argument, chosen_backend
from app.cli.openai_access import add_access_arguments, parse_base_url, prepare, route
from app.cli.bench_balancer import add_balancer_arguments, balancer_backends, behind_telemetry
from app.cli.checks import (ArgProblem, Range, check_config_dir, check_output_path, check_ranges, check_text, check_values,
                            one_line, read_text_file, server_url)
from app.core.bench.capacity import (GROWTH, REFINE_STEPS, STEP_SECONDS, CapacityError, RateLadder, capacity_lines,
                                     capacity_markdown, capacity_to_csv, check_scalable, make_ladder, step_duration)
from app.core.bench.scenario import BUILTIN_SCENARIOS, MIN_SCALE, Scenario, ScenarioError, parse_scenario
from app.core.bench.scenario_run import ScenarioSpecError, scenario_json, scenario_plan, scenario_results, scenario_spec
from app.core.bench.stats import LatencyTargets
from app.core.bench.truncation import PROMPT_CUT_FAILURES, length_words
from app.core.errors import DeckError
from app.core.bench.workload import (DEFAULT_NUM_PREDICT, DEFAULT_PROMPT_SET, LoadPlan, PromptFileError,
                                   parse_prompt_file, prompt_sets)
from app.core.server.mapping import MODEL_FILE
from app.core.server.settings import KV_CACHE_TYPES, ServerSettings
from app.core.bench.sweep import SweepAxes, SweepPlanError, SweepSpec, parse_int_list
from app.core.bench.run import (SweepRun, chart_title, closed_loop, run_to_csv, run_to_json, run_to_markdown, table_header,
                                table_rows)
from app.core.bench.waiting import waits_lines
from app.core.bench.failed_prompts import failed_prompt_lines, failed_prompts
from app.core.bench.vram import estimate_lines, unknown_note
from app.core.bench.run_events import point_event_lines, summary_lines
from app.core.bench.compare import to_csv as comparison_csv, to_markdown as comparison_markdown, with_server_defaults
from app.core.ports.server import ServerControl
from app.core.ports.stores import SweepRecorder

if TYPE_CHECKING:  # the runner (and httpx under it) loads only when a sweep runs

    from app.core.bench.capacity import Capacity, CapacityStep
    from app.services.bench.capacity import CapacityProgress
    from app.services.bench.recording import HistoryOutcome
    from app.services.bench.sweep_runner import AfterSweep, SweepProgress


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Fill the `bench` parser."""
    parser.add_argument("--model", help="model to load, e.g. qwen3:14b (a GGUF file for llama-server); needed "
                                         "unless --demo")
    parser.add_argument("--demo", action="store_true",
                        help="measure the embedded engine: the bundled llama-server on the bundled model (from "
                             "ollama-deck[engine]), started and restarted per point by ollama-deck on a free port "
                             "(implies --backend llama_server and --managed; your saved settings are not used)")
    parser.add_argument("--url", help="server address (default: host and port from the saved settings)")
    add_backend_argument(parser)
    add_access_arguments(parser)
    add_balancer_arguments(parser)
    s = parser.add_argument_group("server settings (need --managed: each value restarts the server)")
    s.add_argument("--managed", action="store_true", help="start and restart our own `ollama serve` per point")
    s.add_argument("--allow-network", action="store_true",
                   help="with --managed: allow a server others can reach (its API has no authentication) on "
                        "the host in --url (or the saved one); a permission saved for that exact host also does")
    s.add_argument("--parallel", help="parallel request slots (the 'batch size'), e.g. 1,2,4,8")
    s.add_argument("--kv-cache", help=f"KV-cache types from {','.join(KV_CACHE_TYPES)}")
    s.add_argument("--context", help="context tokens per slot, e.g. 8192,16384")
    s.add_argument("--flash-attention", help="flash attention modes from on,off,auto")
    s.add_argument("--force", action="store_true",
                   help="also run points the estimate says will not load or would spill to the CPU")
    s.add_argument("--stop-orphan", action="store_true",
                   help="stop a server an earlier ollama-deck started and left running on the port, then go on")
    w = parser.add_argument_group("workload")
    w.add_argument("--concurrency", help="concurrent clients per point, e.g. 1,4,8 (default: the point's parallel)")
    stop = w.add_mutually_exclusive_group()
    stop.add_argument("--requests", type=int, help="counted requests per point (default: 4 per client, at least 8)")
    stop.add_argument("--duration", type=float, metavar="S", help="seconds of new requests per point")
    w.add_argument("--rate", type=float, metavar="RPS", help="open loop: Poisson arrivals per second "
                   "(--concurrency then caps requests in flight)")
    w.add_argument("--warmup", type=int, help="uncounted warm-up requests per point (default: one per client)")
    w.add_argument("--num-predict", type=int,
                   help=f"output tokens per request (default {DEFAULT_NUM_PREDICT}; 0 = no cap)")
    think = w.add_mutually_exclusive_group()
    think.add_argument("--think", dest="think", action="store_const", const=True,
                       help="thinking on (default: the model decides; thinking models think)")
    think.add_argument("--no-think", dest="think", action="store_const", const=False, help="thinking off")
    w.add_argument("--prompt-file", help="prompts: one per line, JSON Lines with \"prompt\", or a JSON array")
    w.add_argument("--prompt-set", default=DEFAULT_PROMPT_SET,
                   help=f"built-in prompts: {', '.join(prompt_sets())} (default {DEFAULT_PROMPT_SET})")
    w.add_argument("--scenario", metavar="NAME|FILE",
                   help=f"run a scenario at each point instead of one prompt: a built-in ({', '.join(BUILTIN_SCENARIOS)}) "
                        "or a TOML/JSON file; --requests is split over its classes (default 8 per class) and "
                        "--concurrency caps requests in flight (default: no cap)")
    w.add_argument("--scale-lengths", type=float, metavar="F",
                   help="with --scenario: every prompt and output length times F (0 < F ≤ 1), e.g. 0.05 for a "
                        "small CPU machine; the output says so")
    w.add_argument("--list-scenarios", action="store_true", help="print the built-in scenarios and their numbers")
    c = parser.add_argument_group("capacity (a rate sweep at one setting, with --scenario)")
    c.add_argument("--rate-sweep", nargs="?", const="", metavar="START:STOP|R1,R2,…",
                   help="after the sweep, raise the scenario's open-loop arrival rates step by step at one setting (the "
                        "recommended point, or the only one) until its targets break, then refine; report the "
                        "sustainable rate and requests per day. Rates are the open-loop classes' total in requests/s: "
                        "START:STOP (e.g. 0.5:8; either side may be left out) or a list (0.5,1,2,4); without a value "
                        f"from half the scenario's rates, ×{GROWTH:g} per step. Closed-loop classes run alongside, "
                        "not scaled. --requests or --duration is per step (default "
                        f"{STEP_SECONDS:g} s)")
    c.add_argument("--refine", type=int, metavar="N",
                   help=f"with --rate-sweep: bisection steps between the last rate that met the targets and the first "
                        f"that missed (default {REFINE_STEPS})")
    c.add_argument("--chart", metavar="FILE.png", help="with --rate-sweep: draw latency against load as a PNG")
    t = parser.add_argument_group("targets (for the recommendation)")
    t.add_argument("--ttft-p95-ms", type=float, default=2000.0, help="time-to-first-token p95 target (default 2000)")
    t.add_argument("--tpot-p95-ms", type=float, default=100.0, help="time-per-output-token p95 target (default 100)")
    t.add_argument("--min-success", type=float, default=0.99, help="least share of successful requests (default 0.99)")
    o = parser.add_argument_group("output")
    o.add_argument("--json", metavar="OUT", help="write the results as JSON (- for stdout)")
    o.add_argument("--csv", metavar="OUT", help="write one CSV row per point")
    o.add_argument("--markdown", metavar="OUT", help="write a Markdown report")
    c = parser.add_argument_group("before/after (needs --managed or --demo)")
    c.add_argument("--compare", action="store_true",
                   help="also measure the server's own default settings (parallel, context, KV cache, flash "
                        "attention as the server sets them when told none; host, port and model kept) and report "
                        "them against the recommended setting, per scenario class: average and P95 latency, "
                        "tokens/s, peak VRAM, GPU utilisation; --markdown and --json include the report")
    c.add_argument("--compare-report", metavar="FILE",
                   help="with --compare: write the before/after report alone, by the file's extension: .md "
                        "(Markdown tables), .csv (one row per figure), .json or .png (a bar chart)")
    o.add_argument("--no-history", action="store_true", help="do not keep this run in the benchmark history")
    o.add_argument("--config-dir", help="settings folder (default: the user config folder)")
    o.add_argument("--history", metavar="FILE", help="history database (default: the user data folder)")
    o.add_argument("--quiet", action="store_true", help="no progress lines on stderr")


class InputError(ArgProblem):
    """Unusable command-line input."""


RANGES = (
    Range("--requests", 1, 1_000_000, "requests", "counted requests per point; a million already takes hours"),
    Range("--duration", 0, 86_400, "s", "seconds of new requests per point, at most 24 h", above=True),
    Range("--rate", 0, 10_000, "requests/s", "open-loop arrivals; one server takes far fewer", above=True),
    Range("--warmup", 0, 10_000, "requests", "uncounted requests before each point"),
    Range("--num-predict", 0, 1 << 24, "tokens", "output tokens per request, 0 for no cap"),
    Range("--ttft-p95-ms", 0, 3_600_000, "ms", "a latency target, at most an hour", above=True),
    Range("--tpot-p95-ms", 0, 3_600_000, "ms", "a latency target, at most an hour", above=True),
    Range("--min-success", 0, 1, "", "a share of requests: 0.99 is 99 %"),
    Range("--scale-lengths", MIN_SCALE, 1, "", "a factor on the scenario's token lengths"),
)
SCENARIO_ONLY = (("--rate", "rate", "its classes set their arrivals"),
                 ("--prompt-file", "prompt_file", "its classes make their prompts"),
                 ("--think/--no-think", "think", "its classes set their thinking share"))
CLIENTS = Range("--concurrency", 1, 1024, "clients", "concurrent clients per point")


def _values(text: str | None, allowed: tuple[str, ...], what: str) -> tuple[str, ...] | None:
    if text is None:
        return None
    values = tuple(v.strip() for v in text.split(",") if v.strip())
    bad = [v for v in values if v not in allowed]
    if bad or not values:
        raise InputError(f"{what}: {', '.join(bad) or 'nothing given'} — choose from {', '.join(allowed)}")
    return values


def _demo(args: argparse.Namespace) -> ServerSettings:
    """--demo: the embedded engine's settings, with --managed and the bundled model filled in."""
    from app.backends.llama_server.engine import embedded_settings, engine_status, find_bundled_model

    if args.backend not in (None, "llama_server"):
        raise InputError(f"--demo runs the embedded llama-server; it cannot measure --backend {args.backend}")
    status = engine_status()
    if not status.ready:
        raise InputError("--demo needs the embedded engine: " + " ".join([*status.problems, *status.commands]))
    args.backend, args.managed = "llama_server", True
    if args.model is None:
        args.model = str(find_bundled_model())
    return embedded_settings()


def _settings(args: argparse.Namespace) -> tuple[ServerSettings, str | None]:
    """The saved settings with --url's host and port, and the base URL to measure (None: the settings');
    with --demo the embedded engine's instead of the saved ones."""
    from app.adapters.storage.settings_store import SettingsStore
    from app.backends import registry

    demo = _demo(args) if getattr(args, "demo", False) else None

    tuning = registry.get(chosen_backend(args)).tuning
    if demo is None:
        check_config_dir("--config-dir", args.config_dir)
        # Only read: a damaged file stays where it is for the window to move aside and report. A file that could
        # not be used at all is said here (a field's problem is said by the checks of what uses it).
        loaded = SettingsStore(Path(args.config_dir) if args.config_dir else None, tuning).load(change_nothing=True)
        for problem in loaded.problems if loaded.unusable else ():
            print(f"ollama-deck bench: settings: {one_line(problem)}", file=sys.stderr)
    settings = demo or loaded.settings
    settings = settings.replace(backend=chosen_backend(args))
    # A server that serves the one model file it is started with (llama-server's -m): a managed sweep on
    # --model naming such a file starts the server on it.
    model_file = next((o.name for o in tuning.options if o.kind == MODEL_FILE), None)
    model = getattr(args, "model", None)
    if args.managed and model_file is not None and model:
        path = Path(model).expanduser()
        if path.is_file():
            settings = settings.with_options(**{model_file: str(path.resolve())})
        elif path.exists():
            raise InputError(f"--model {model} is a folder; give the GGUF model file the server is to serve")
        elif os.sep in model or path.suffix.lower() == ".gguf":
            raise InputError(f"--model {model}: there is no such file (the server is started on the model file "
                             "given); check the path")
    backend = registry.get(chosen_backend(args))
    server_axes = [getattr(args, name, None) for name in ("parallel", "kv_cache", "context", "flash_attention")]
    if (args.managed or any(v is not None for v in server_axes)) and not backend.can("restarts_with_settings"):
        raise InputError(f"--managed and the server settings (--parallel, --kv-cache, --context, --flash-attention) "
                         f"restart the server: {backend.why_not('restarts_with_settings')} Vary --concurrency, "
                         "--rate or --scenario instead")
    access_url, args.access_notes = prepare(args, backend.name, args.url)  # said once every check passed
    base_url = None
    if args.url is not None:
        url = parse_base_url(access_url) if access_url else server_url("--url", args.url)
        if args.managed and url.path:
            raise InputError(f"--managed starts the server at host:port, so --url takes no path ({url.path}); "
                             f"use http://{url.authority}")
        # A saved permission names its host: replace() drops it when --url names another one.
        settings, base_url = settings.replace(host=url.host, port=url.port), url.base_url
        if access_url:
            route(settings.base_url, access_url)  # clients made from the settings' host:port go to the full URL
    if getattr(args, "allow_network", False):
        settings = settings.allowing_network()
    return settings, base_url


def check_outputs(args: argparse.Namespace) -> None:
    """InputError unless every output can be written; checked before the run, which may take hours. (--history
    is the history store's: it makes its folder and says itself what keeps it from opening.)"""
    report = getattr(args, "compare_report", None)
    outputs = [(flag, path) for flag, path in (("--json", args.json), ("--csv", args.csv),
                                               ("--markdown", args.markdown), ("--compare-report", report))
               if path is not None]
    for flag, path in outputs:
        check_output_path(flag, path)
    stdout = [flag for flag, path in outputs if path == "-"]
    if len(stdout) > 1:
        raise InputError(f"{' and '.join(stdout)} both write to stdout (-); send all but one to a file")
    files = [Path(path).resolve() for _flag, path in outputs if path != "-"]
    if len(set(files)) < len(files):
        raise InputError("two of --json, --csv, --markdown and --compare-report name the same file; give each "
                         "its own")


REPORT_FORMATS = (".md", ".csv", ".json", ".png")


def check_compare(args: argparse.Namespace) -> None:
    """InputError when --compare or --compare-report cannot be honoured: the default settings can only be measured
    on a server ollama-deck starts, and the report's format is told by its file's extension."""
    report = getattr(args, "compare_report", None)
    if report is not None and not args.compare:
        raise InputError("--compare-report writes the before/after report of --compare; add --compare")
    if not args.compare:
        return
    if not args.managed:
        raise InputError("--compare measures the server's own default settings, which means restarting the server "
                         "on them; a server ollama-deck did not start keeps the settings it runs with, so its "
                         "default cannot be set. Add --managed (ollama-deck starts its own server) or use --demo")
    if report is not None:
        suffix = Path(report).suffix.lower()
        if report == "-" or suffix not in REPORT_FORMATS:
            raise InputError(f"--compare-report {report}: name a file ending in {', '.join(REPORT_FORMATS)}; the "
                             "extension chooses the format")


def with_default(spec: SweepSpec, args: argparse.Namespace) -> SweepSpec:
    """With --compare: the spec with the server's own default settings (its backend's, on the base's host, port,
    model and options) to measure as a point; SweepPlanError when those cannot run here."""
    if not args.compare:
        return spec
    from app.backends import registry

    return with_server_defaults(spec, registry.get(spec.base.backend or chosen_backend(args)).tuning.server_defaults)


def _exposure_warning(base: ServerSettings) -> str:
    """The warning line for a managed server others can reach ('' if none); InputError when not allowed."""
    from app.backends import registry
    from app.core.server.exposure import exposure_of

    exposure = exposure_of(base, registry.get(base.backend).tuning)
    if not exposure.allowed:
        undo = f", or use --url http://127.0.0.1:{base.port}" if exposure.network else ""
        undo += ", or remove what opens it from the saved extra settings" if exposure.others else ""
        raise InputError(f"{exposure.refusal()} Add --allow-network to allow it for {base.host}{undo}.")
    return exposure.warning()


def build_spec(args: argparse.Namespace, base: ServerSettings) -> SweepSpec:
    """The sweep the arguments describe; InputError/SweepPlanError say what is wrong."""
    server_axes = [args.parallel, args.kv_cache, args.context, args.flash_attention]
    if any(v is not None for v in server_axes) and not args.managed:
        raise InputError("--parallel, --kv-cache, --context and --flash-attention restart the server per value, "
                         "so they need --managed; without it only --concurrency varies")
    check_ranges(args, RANGES)
    check_text("--model", args.model, empty_ok=False)
    contexts = parse_int_list(args.context, "--context") if args.context else None
    axes = SweepAxes(parallel=parse_int_list(args.parallel, "--parallel") if args.parallel else None,
                     concurrency=parse_int_list(args.concurrency, "--concurrency") if args.concurrency else None,
                     kv_cache_types=_values(args.kv_cache, KV_CACHE_TYPES, "--kv-cache"),
                     context_lengths=contexts, flash_attention=_values(args.flash_attention, ("on", "off", "auto"),
                                                                      "--flash-attention"))
    if axes.concurrency is not None:
        check_values("--concurrency", axes.concurrency, CLIENTS)
    ladder = rate_ladder(args)
    scenario = load_scenario(args)
    if scenario is not None and ladder is not None:
        try:
            check_scalable(scenario)
        except CapacityError as exc:
            raise InputError(f"--rate-sweep: {exc}") from None
    if scenario is not None:
        return _scenario_spec(args, base, axes, scenario)
    if args.prompt_file is not None:
        text = read_text_file("--prompt-file", args.prompt_file, "prompts as text: one per line, JSON Lines "
                              "or a JSON array")
        prompts = parse_prompt_file(text, args.prompt_file)
    else:
        sets = prompt_sets()
        if args.prompt_set not in sets:
            raise InputError(f"--prompt-set {args.prompt_set!r} is unknown; choose from {', '.join(sets)}")
        prompts = sets[args.prompt_set]
    per_client = 4 if args.requests is None and args.duration is None else None
    plan = LoadPlan(model=args.model, prompts=prompts, mode="open" if args.rate else "closed",
                    concurrency=1, rate_rps=args.rate or 0.0, requests=args.requests, duration_s=args.duration,
                    requests_per_client=per_client,
                    warmup_requests=args.warmup, num_predict=_num_predict(args), think=args.think)
    problems = [p for p in plan.problems() if "clients" not in p and "in-flight" not in p]  # set per point
    if problems:
        raise InputError(" ".join(problems))
    if args.rate and axes.concurrency is None:
        axes = replace(axes, concurrency=(0,))  # open loop: no in-flight cap unless --concurrency sets one
    targets = LatencyTargets(args.ttft_p95_ms, args.tpot_p95_ms, args.min_success)
    spec = SweepSpec(base, axes, plan, targets, managed=args.managed, force=args.force)
    spec.plan()  # raises SweepPlanError early
    return spec


def rate_ladder(args: argparse.Namespace) -> RateLadder | None:
    """The rate sweep --rate-sweep asks for (None: none); InputError says what is wrong. Needs the scenario
    --scenario names, with an open-loop class."""
    if args.rate_sweep is None:
        for flag, value in (("--refine", args.refine), ("--chart", args.chart)):
            if value is not None:
                raise InputError(f"{flag} goes with --rate-sweep, which measures the capacity it describes")
        return None
    if args.scenario is None:
        raise InputError("--rate-sweep raises a scenario's arrival rates; add --scenario NAME|FILE (e.g. --scenario "
                         "customer-qa)")
    try:
        ladder = make_ladder(args.rate_sweep, args.refine)
    except CapacityError as exc:
        raise InputError(f"--rate-sweep {exc}") from None
    if args.chart is not None:
        check_output_path("--chart", args.chart)
        if args.chart == "-" or not args.chart.lower().endswith(".png"):
            raise InputError(f"--chart {args.chart}: name a .png file, e.g. --chart capacity.png")
    return ladder


def _num_predict(args: argparse.Namespace) -> int | None:
    value = DEFAULT_NUM_PREDICT if args.num_predict is None else args.num_predict
    return value or None


def load_scenario(args: argparse.Namespace) -> Scenario | None:
    """The scenario --scenario names (a built-in or a file), scaled by --scale-lengths; None without
    --scenario. InputError says what is wrong."""
    if args.scenario is None:
        if args.scale_lengths is not None:
            raise InputError("--scale-lengths scales a scenario's lengths; add --scenario NAME|FILE")
        return None
    name = args.scenario.strip()
    if name in BUILTIN_SCENARIOS:
        scenario = BUILTIN_SCENARIOS[name]
    elif Path(name).expanduser().is_file() or name.endswith((".toml", ".json")) or os.sep in name:
        text = read_text_file("--scenario", str(Path(name).expanduser()), "a scenario as TOML or JSON")
        try:
            scenario = parse_scenario(text, name)
        except ScenarioError as exc:
            raise InputError(f"--scenario: {exc}") from None
    else:
        raise InputError(f"--scenario {name!r} is neither a built-in scenario ({', '.join(BUILTIN_SCENARIOS)}) nor a "
                         "file; --list-scenarios prints the built-ins")
    if args.scale_lengths is not None and args.scale_lengths != 1:
        scenario = scenario.scaled(args.scale_lengths)
    return scenario


def _scenario_spec(args: argparse.Namespace, base: ServerSettings, axes: SweepAxes, scenario: Scenario) -> SweepSpec:
    for flag, dest, why in SCENARIO_ONLY:
        if getattr(args, dest) is not None:
            raise InputError(f"{flag} does not go with --scenario: {why}")
    if args.num_predict is not None:
        raise InputError("--num-predict does not go with --scenario: its classes set their output lengths")
    from app.backends import registry

    if not registry.get(chosen_backend(args)).capabilities.thinking_control and any(
            c.thinking_share for c in scenario.classes):
        print(f"ollama-deck bench: note: {chosen_backend(args)} cannot switch thinking per request; the scenario's "
              "thinking shares are not used", file=sys.stderr)
        scenario = scenario.without_thinking()
    duration = args.duration
    if args.rate_sweep is not None:
        duration = step_duration(args.requests, duration)
    try:
        plan = scenario_plan(args.model, scenario, requests=args.requests, duration_s=duration,
                             warmup_requests=args.warmup)
    except ScenarioSpecError as exc:
        raise InputError(str(exc)) from None
    targets = LatencyTargets(args.ttft_p95_ms, args.tpot_p95_ms, args.min_success)
    return scenario_spec(base, axes, plan, targets, managed=args.managed, force=args.force)  # SweepPlanError early


def _figure(x: float, unit: str) -> str:
    """A whole figure with its unit, or "—" where none was measured (NaN: no successful request)."""
    return "—" if math.isnan(x) else f"{x:.0f}{unit}"


def _ms(x: float) -> str:
    return _figure(x, " ms")


def render_classes(run: SweepRun) -> str:
    """The scenario, then per point one line per class: requests, TTFT and end-to-end (average and P95),
    output tokens/s and whether its targets were met; '' without a scenario."""
    scenario = run.spec.workload.scenario
    if scenario is None:
        return ""
    out = ["", *scenario.lines()]
    for point in scenario_results(run):
        out.append(f"point {point.label}:")
        width = max(len(c.stats.name) for c in point.classes)
        for c in point.classes:
            s = c.stats
            out.append(f"  {s.name.ljust(width)}  {s.requests_ok}/{s.requests} ok  TTFT avg {_ms(s.ttft_ms.mean)} "
                       f"P95 {_ms(s.ttft_ms.p95)}  E2E avg {_ms(s.e2e_ms.mean)} P95 {_ms(s.e2e_ms.p95)}  "
                       f"{s.output_tokens_per_s:.1f} tok/s  prompt {_figure(s.prompt_tokens_mean, ' tok')}  {c.verdict}")
    return "\n".join(out)


def render_table(run: SweepRun) -> str:
    """The results as an aligned text table with the recommendation under it."""
    header = table_header(run.results)
    rows = [list(header)] + table_rows(run.results)
    widths = [max(len(r[i]) for r in rows) for i in range(len(header) - 1)]
    lines = []
    rec = run.recommendation.index if run.recommendation else None
    for n, row in enumerate(rows):
        mark = "*" if n and run.results[n - 1].point.index == rec else " "
        cells = [row[i].rjust(widths[i]) for i in range(len(widths))] + [row[-1]]
        lines.append(f"{mark} " + "  ".join(cells))
    out = [f"{run.title} — {run.spec.workload.describe(per_point_clients=True)}", "", *lines]
    lengths = [(r, length_words(r.stats)) for r in run.results if r.stats is not None]
    out += [f"{r.point.label(run.varying)}: {words}" for r, words in lengths if words]
    out += [f"✖ {r.point.label(run.varying)}: {r.detail}" for r in run.results if r.failure in PROMPT_CUT_FAILURES]
    note = unknown_note(run.results)
    out += [note] if note else []
    estimates = estimate_lines(run.results, run.varying)
    if estimates:
        out += ["", "VRAM, the estimate against the server's own peak:", *[f"  {e}" for e in estimates]]
    failed = failed_prompt_lines(failed_prompts(run.results, run.spec.workload))
    out += ["", *failed] if failed else []
    waits = waits_lines(run.results, run.varying, closed_loop(run))
    out += ["", *waits] if waits else []
    watched = point_event_lines(run)  # what the server did without saying so, point by point
    out += ["", "What the server did without saying so, point by point:", *watched] if watched else []
    summary = summary_lines(run)
    out += ["", *summary] if summary else []
    if run.recommendation:
        out += ["", run.recommendation.text]
    out += [f"note: {n}" for n in run.notes]
    classes = render_classes(run)
    return "\n".join(out) + (f"\n{classes}" if classes else "")


def write_report(run: SweepRun, path: str, labels: dict[str, str]) -> None:
    """The run's before/after report in the format its file's extension names (see REPORT_FORMATS)."""
    comparison = run.comparison
    assert comparison is not None
    title = chart_title(run, labels)
    suffix = Path(path).suffix.lower()
    if suffix == ".png":
        from app.ui.widgets.compare_chart import save_comparison_png

        save_comparison_png(comparison, title, path)
    elif suffix == ".csv":
        _write(path, comparison_csv(comparison))
    elif suffix == ".json":
        _write(path, json.dumps({"title": title, **comparison.to_json()}, indent=1, ensure_ascii=False) + "\n")
    else:
        _write(path, comparison_markdown(comparison, title))


def capacity_csv_path(path: str) -> str:
    """Where --csv's rate-sweep steps go: beside the points' file, "-capacity" before its suffix."""
    target = Path(path)
    return str(target.with_name(f"{target.stem}-capacity{target.suffix or '.csv'}"))


def _write_capacity_csv(path: str, text: str) -> None:
    """The rate sweep's steps as CSV: after a blank line on stdout, else in their own file (said on stderr)."""
    if path == "-":
        sys.stdout.write("\n" + text)
        return
    steps = capacity_csv_path(path)
    Path(steps).write_text(text, encoding="utf-8")
    print(f"ollama-deck bench: the rate sweep's steps are in {steps}", file=sys.stderr)


def _write_chart(path: str, run: SweepRun) -> None:
    """Latency against load as a PNG, drawn by Qt off screen."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtGui import QGuiApplication

    from app.ui.widgets.load_chart import load_chart_image

    app = QGuiApplication.instance() or QGuiApplication([])
    assert run.capacity is not None
    image = load_chart_image(run.capacity, run.title)
    if not image.save(path):  # PNG: the name ends in .png
        print(f"ollama-deck bench: --chart {path} could not be written", file=sys.stderr)
    del app


def _write(path: str, text: str) -> None:
    if path == "-":
        sys.stdout.write(text)
        return
    Path(path).write_text(text, encoding="utf-8")


class _Progress:
    """Progress lines on stderr: one per phase, and the request count at most once a second."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self._last = ("", -1)
        self._last_t = 0.0

    def __call__(self, p: SweepProgress) -> None:
        if self.quiet:
            return
        key = (p.phase, p.point)
        now = time.monotonic()
        if key == self._last and now - self._last_t < 1.0:
            return
        self._last, self._last_t = key, now
        eta = f", about {p.eta_s:.0f} s left" if p.eta_s is not None else ""
        where = f"[{min(p.point + 1, p.points)}/{p.points}] {p.label} " if p.label else ""
        text = " ".join(part for part in (f"{where}{p.phase}".strip(), p.detail.strip()) if part)
        print(f"{text}{eta}", file=sys.stderr, flush=True)


async def _run(spec: SweepSpec, args: argparse.Namespace, history: SweepRecorder | None,
               url: str | None = None) -> tuple[SweepRun, HistoryOutcome | None]:
    """The sweep as measured, and what the history kept of it (None: no history asked for)."""
    from app.adapters.telemetry.contention import contention_probes
    from app.adapters.telemetry.host import host_memory_reader
    from app.adapters.telemetry.nvml import make_gpu_backend
    from app.backends import registry
    from app.services.bench.recording import QueuedRecorder
    from app.services.bench.sweep_runner import SweepRunner
    from app.services.bench.sweep_watch import ServerFeed
    from app.core.server.state import ServerState

    backend = registry.get(chosen_backend(args)).bound(lambda: spec.base)
    behind = behind_telemetry(getattr(args, "behind_backends", ()))
    gpu = make_gpu_backend()
    supervisor: ServerControl | None = None
    watcher: ServerControl | None = None  # an attached local server, watched for its process tree only
    feed = ServerFeed()  # the managed server's log lines and statuses, for the sweep's watchdog
    try:
        if spec.managed:
            from app.adapters.storage.paths import runtime_dir

            supervisor = backend.server(spec.base, on_status=feed.on_status, on_log=feed.on_log,
                                        runtime_dir=runtime_dir(args.config_dir or None))
            status = await supervisor.probe()
            if status.orphan and not args.stop_orphan:
                supervisor = None  # closing it would stop the server: leave it as it was found
                raise InputError(f"--managed: a server that an earlier ollama-deck started (pid {status.pid}) still "
                                 f"runs at {spec.base.base_url}; its app was closed without stopping it. Add "
                                 "--stop-orphan to stop it and go on, or pick a free port with --url")
            if status.orphan:
                status = await supervisor.stop()
                print(f"ollama-deck bench: {status.message}", file=sys.stderr, flush=True)
            if status.state is ServerState.RUNNING_ATTACHED:
                raise InputError(f"--managed: {backend.command_words.a_server} that ollama-deck did not start already "
                                 f"answers at {spec.base.base_url} ({status.message}); stop it, or pick a free port "
                                 "with --url")
            if status.state in (ServerState.NOT_INSTALLED, ServerState.PORT_CONFLICT):
                raise InputError(f"--managed: {status.message}")
        base_url = url if url is not None and not spec.managed else spec.base.base_url
        if not spec.managed:
            from app.cli.server_reply import require_reply

            async with backend.catalog(base_url) as catalog:
                await require_reply(catalog, base_url)  # a hung server is named in seconds, not after 300 s
            if base_url == spec.base.base_url and not behind:  # a balancer's processes are not a server's
                # A server on this computer that ollama-deck did not start: watched, never stopped, so that its own
                # process tree's GPU memory is the sweep's Peak VRAM.
                from app.adapters.storage.paths import runtime_dir as runtime_folder

                watcher = backend.server(spec.base, on_status=feed.on_status, on_log=feed.on_log,
                                         runtime_dir=runtime_folder(args.config_dir or None))
                if (await watcher.probe()).state is not ServerState.RUNNING_ATTACHED:
                    await watcher.close()
                    watcher = None
        pids = supervisor.server_pids if supervisor else watcher.server_pids if watcher else (lambda: [])
        runner = SweepRunner(supervisor, backend.catalog, backend.load_client, base_url=base_url, gpu=gpu,
                             server_pids=pids,
                             app_version=__version__,
                             # behind a balancer, each backend is read at its own URL, not at the balancer's
                             server_telemetry=None if behind else backend.server_telemetry, behind=behind,
                             host_memory=host_memory_reader(pids),
                             contention=contention_probes(gpu), planner=backend.planner,
                             prompt_counter=backend.prompt_counter, log_signals=backend.log_signals,
                             server_feed=feed,
                             learner=RuntimeLearner(AllowanceStore(Path(args.config_dir) if args.config_dir else None),
                                                    gpu.info()))
        # SQLite writes go to one worker thread, in order, so the loop driving the workload never waits on disk.
        recorder = QueuedRecorder(history) if history is not None else None
        run: SweepRun | None = None
        try:
            run = await runner.run(spec, _Progress(args.quiet), recorder.point_done if recorder else None,
                                   recorder.started if recorder else None, after=_capacity_stage(args))
        finally:
            outcome = await asyncio.to_thread(recorder.close, run) if recorder is not None else None
        return run, outcome
    finally:
        if supervisor is not None:
            await supervisor.close()
        if watcher is not None:
            await watcher.close()  # stops watching; a server ollama-deck did not start is never stopped
        gpu.close()


def _capacity_stage(args: argparse.Namespace) -> AfterSweep | None:
    """The rate sweep to run after the sweep (None: none asked), printing its progress on stderr."""
    ladder = rate_ladder(args)
    if ladder is None:
        return None
    from app.services.bench.capacity import CapacitySweep

    last = [("", -1, 0.0)]

    def progress(p: CapacityProgress) -> None:
        now = time.monotonic()
        if args.quiet or ((p.phase, p.step) == last[0][:2] and now - last[0][2] < 1.0):
            return
        last[0] = (p.phase, p.step, now)
        detail = f" {p.detail}" if p.detail else ""
        print(f"capacity step {p.step + 1} at {p.offered_rps:.3g} req/s: {p.phase}{detail}", file=sys.stderr,
              flush=True)

    def step_done(_capacity: Capacity, step: CapacityStep) -> None:
        if not args.quiet:
            verdict = "met the targets" if step.met else "missed: " + "; ".join(m.words() for m in step.misses)
            print(f"capacity step {step.order + 1} at {step.offered_rps:.3g} req/s: {verdict}", file=sys.stderr,
                  flush=True)

    return CapacitySweep(ladder, progress, step_done)


def _open_history(args: argparse.Namespace) -> SweepRecorder | None:
    """The history to keep this run in (None: run without), after printing on stderr what opening it found."""
    from app.adapters.storage.history import BenchHistory, HistoryError, HistoryLocationError

    history = BenchHistory(Path(args.history) if args.history else None, named=bool(args.history))
    try:
        for problem in history.open():  # moved aside, converted, read-only: said before the sweep starts
            print(f"ollama-deck bench: {problem}", file=sys.stderr)
    except HistoryLocationError as exc:
        if args.history:
            raise InputError(f"--history: {exc.user_text()}") from None
        print(f"ollama-deck bench: {exc.message} This run is not kept in the history.", file=sys.stderr)
        return None
    except HistoryError as exc:
        print(f"ollama-deck bench: {exc.message} This run is not kept in the history.", file=sys.stderr)
        return None
    return None if history.read_only else history


def history_words(kept: HistoryOutcome, args: argparse.Namespace) -> str:
    """The line that says the history could not keep a run, what it holds of it, and where the results are."""
    outputs = [path for path in (args.json, args.csv, args.markdown, getattr(args, "compare_report", None))
               if path not in (None, "-")]
    where = "printed above" + (f" and written to {', '.join(outputs)}" if outputs else "")
    if kept.run_id is None:
        held = "this run is not in it"
    else:
        held = (f"it holds run {kept.run_id} with {kept.points_kept} of its {kept.points} points, left open: it is "
                "listed as interrupted once this command has ended")
    return (f"the benchmark history could not keep this run ({one_line(kept.error)}); {held}. The results are "
            f"complete, {where}.")


def run(args: argparse.Namespace) -> int:
    """Execute `ollama-deck bench`."""
    if args.list_scenarios:
        for scenario in BUILTIN_SCENARIOS.values():
            print("\n".join(scenario.lines()))
        return 0
    try:
        if args.model is None and not args.demo:
            raise InputError("--model is needed: the model to load, e.g. --model qwen3:14b (or --demo to measure "
                             "the embedded engine on its bundled model)")
        fleet_url, args.behind_backends = balancer_backends(args)
        args.url = fleet_url or args.url
        base, url = _settings(args)
        check_compare(args)
        warning = _exposure_warning(base) if args.managed else ""  # before the plan, whose checks say less
        spec = with_default(build_spec(args, base), args)
        check_outputs(args)
    except (ArgProblem, SweepPlanError, PromptFileError) as exc:
        print(f"ollama-deck bench: {one_line(str(exc))}", file=sys.stderr)
        return 2
    try:
        history = None if args.no_history else _open_history(args)
    except InputError as exc:
        print(f"ollama-deck bench: {one_line(str(exc))}", file=sys.stderr)
        return 2
    if warning:  # printed even with --quiet: every start beyond loopback says so
        print(f"ollama-deck bench: warning: {warning}", file=sys.stderr, flush=True)
    for note in getattr(args, "access_notes", ()):
        print(f"ollama-deck bench: {note}", file=sys.stderr, flush=True)
    try:
        result, kept = asyncio.run(_run(spec, args, history, url))
    except KeyboardInterrupt:
        print("ollama-deck bench: interrupted; the server was put back as it was.", file=sys.stderr)
        return 130
    except InputError as exc:
        print(f"ollama-deck bench: {one_line(str(exc))}", file=sys.stderr)
        return 2
    except DeckError as exc:
        print(f"ollama-deck bench: {one_line(exc.user_text())}", file=sys.stderr)
        return 1
    from app.adapters.storage.saved_format import SAVED_FORMAT
    from app.backends import registry

    # With the JSON on stdout the table goes to stderr, so the JSON can be piped.
    table = render_table(result)
    # The rate sweep at the chosen point, then (with --compare) the one at the server's default setting.
    capacities = [c for c in (result.capacity, result.default_capacity) if c is not None]
    for capacity in capacities:
        table += "\n\n" + "\n".join(capacity_lines(capacity))
    print(table, file=sys.stderr if args.json == "-" else sys.stdout)
    if args.json:
        data = run_to_json(result, SAVED_FORMAT)
        scenario_json(result, data)
        _write(args.json, json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    if args.csv:
        _write(args.csv, run_to_csv(result))
        if capacities:
            _write_capacity_csv(args.csv, capacity_to_csv(*capacities))
    if args.markdown:
        markdown = run_to_markdown(result, registry.display_names())
        for capacity in capacities:
            markdown += "\n" + capacity_markdown(capacity)
        _write(args.markdown, markdown)
    if args.chart and result.capacity is not None and result.capacity.steps:
        _write_chart(args.chart, result)
    if args.compare:
        out = sys.stderr if args.json == "-" or args.markdown == "-" or args.csv == "-" else sys.stdout
        if result.comparison is None:
            print("ollama-deck bench: the default setting was not measured (the run ended before it), so there "
                  "is no before/after report.", file=sys.stderr)
        else:
            print("\n" + comparison_markdown(result.comparison, chart_title(result, registry.display_names())),
                  file=out)
            if args.compare_report:
                write_report(result, args.compare_report, registry.display_names())
    if kept is not None and not kept.saved:
        print(f"ollama-deck bench: {history_words(kept, args)}", file=sys.stderr)
    return 0 if any(r.ran for r in result.results) else 1
