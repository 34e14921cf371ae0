"""The `ollama-deck exporter` command scraped by Debian's real Prometheus 2.42, alone and in front of the real
llama-server (the embedded engine): what Prometheus stores is what psutil and llama-server's own counters say."""

from __future__ import annotations

from pathlib import Path

import psutil
import pytest
from prometheus_client.parser import text_string_to_metric_families

from app import __version__
from tests.backends.llama_server.engine_server import get, llama_server, post_json
from tests.fakes.raw_http import closed_port
from tests.prometheus_server import exporter, prometheus, wait_for

SCRAPE_WAIT_S = 60.0


def own_counter(base_url: str, name: str) -> float:
    """A counter as llama-server's own /metrics gives it now."""
    status, body = get(f"{base_url}/metrics")
    assert status == 200
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            if sample.name == name:
                return float(sample.value)
    raise AssertionError(f"{name} is not in llama-server's /metrics")


@pytest.mark.slow
def test_prometheus_scrapes_the_host_figures_psutil_reads(prometheus_binary: Path, tmp_path: Path) -> None:
    server = f"http://127.0.0.1:{closed_port()}"
    with exporter("--listen", "127.0.0.1:0", "--url", server, "--backend", "llama_server", "--interval", "0.25") as app:
        with prometheus(prometheus_binary, [app.address], tmp_path / "prometheus") as prom:
            wait_for(prom.all_up, SCRAPE_WAIT_S, lambda: f"the exporter's target to be up: {prom.targets()}")
            total = wait_for(lambda: prom.value("ollama_deck_host_memory_total_bytes"), SCRAPE_WAIT_S,
                             "ollama_deck_host_memory_total_bytes in Prometheus")
            info = prom.query("ollama_deck_info")["data"]["result"]
            down = wait_for(lambda: prom.query("ollama_deck_server_up")["data"]["result"], SCRAPE_WAIT_S,
                            "ollama_deck_server_up in Prometheus")
    assert total == psutil.virtual_memory().total
    assert info[0]["metric"]["version"] == __version__ and info[0]["value"][1] == "1"
    assert down[0]["metric"]["url"] == server and down[0]["metric"]["backend"] == "llama_server"
    assert down[0]["value"][1] == "0"  # nothing listens there


@pytest.mark.engine
def test_generated_tokens_in_prometheus_equal_llama_servers_own_counter(
        llama_server_binary: Path, bundled_model: Path, prometheus_binary: Path, tmp_path: Path) -> None:
    flags = ("-np", "1", "-c", "1024", "-t", "2", "--metrics")
    with llama_server(llama_server_binary, bundled_model, tmp_path, flags) as engine, \
            exporter("--listen", "127.0.0.1:0", "--url", engine.base_url, "--backend", "llama_server",
                     "--interval", "0.25") as app, \
            prometheus(prometheus_binary, [app.address], tmp_path / "prometheus") as prom:
        wait_for(prom.all_up, SCRAPE_WAIT_S, lambda: f"the exporter's target to be up: {prom.targets()}")
        labels = f'{{backend="llama_server",url="{engine.base_url}"}}'
        wait_for(lambda: prom.value(f"ollama_deck_server_up{labels}") == 1, SCRAPE_WAIT_S, "the server to be up")
        reply = post_json(f"{engine.base_url}/v1/chat/completions", {
            "messages": [{"role": "user", "content": "Name three colours."}], "max_tokens": 24, "temperature": 0})
        generated = reply["usage"]["completion_tokens"]
        # llama-server adds a reply to its counter a moment after it answers: wait for its own figure first.
        own = wait_for(lambda: (n := own_counter(engine.base_url, "llamacpp:tokens_predicted_total")) >= generated
                       and n, SCRAPE_WAIT_S, "llama-server to count the reply")
        exported = wait_for(lambda: prom.value(f"ollama_deck_server_generated_tokens_total{labels}") == own and own,
                            SCRAPE_WAIT_S,
                            lambda: f"Prometheus to hold {own} generated tokens, it has "
                                    f"{prom.value('ollama_deck_server_generated_tokens_total')}")
        own_prompt = own_counter(engine.base_url, "llamacpp:prompt_tokens_total")
        wait_for(lambda: prom.value(f"ollama_deck_server_prompt_tokens_total{labels}") == own_prompt, SCRAPE_WAIT_S,
                 f"Prometheus to hold llama-server's {own_prompt} prompt tokens")
        slots = prom.value(f"ollama_deck_server_slots_total{labels}")
    assert exported == own == generated
    assert own_prompt > 0 and slots == 1
