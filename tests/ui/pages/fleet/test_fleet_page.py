"""The Fleet page, wired as the composition root wires it, over the real parts: two llama-servers behind
Debian's nginx, and the real Prometheus scraping them beside the DCGM and node-exporter files of
tests/data/fleet/; plus a server nothing answers for, and the page without a fleet file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.backends import registry
from app.ui.app.fleet_setup import behind_the_balancer, fleet_page
from app.core.fleet_status import FleetSnapshot, ScrapeTarget
from app.ui.pages.fleet.page import FleetPage, targets_text
from app.ui.pages.fleet.table import ENDPOINT, GPU, HEALTH, MODEL, QUEUE, RAM, SLOTS, SOURCE, TOKENS
from tests.adapters.prometheus.fleet_stack import FleetStack, module_fleet_stack
from tests.backends.llama_server.engine_server import free_port
from tests.cli.test_bench_balancer_args import FLEET

BACKENDS = {name: registry.get(name) for name in registry.names()}
WAIT_MS = 30_000


stack = module_fleet_stack(with_nginx=True)


def _page(qtbot: Any, page_context: Any, path: Path | None) -> FleetPage:
    page, _fleet = fleet_page(page_context(), str(path) if path else None, BACKENDS)
    qtbot.addWidget(page)
    return page


@pytest.mark.slow
@pytest.mark.engine
def test_rows_fill_a_down_server_says_why_and_the_queries_are_shown(qtbot, page_context, stack: FleetStack,
                                                                    tmp_path: Path) -> None:
    nobody = f"127.0.0.1:{free_port()}"
    path = tmp_path / "fleet.toml"
    path.write_text(stack.toml(extra=f'\n[[server]]\nname = "box-c"\nurl = "http://{nobody}"\n'
                                     'backend = "llama_server"\nhost = "box-c"\n'))
    page = _page(qtbot, page_context, path)
    page.resize(1280, 640)
    page.show()
    table = page.table
    qtbot.waitUntil(lambda: page.polls >= 2 and table.rowCount() == 4, timeout=WAIT_MS)
    try:
        a, c, balancer = table.row_of("box-a"), table.row_of("box-c"), table.row_of("nginx")
        assert table.cell_text(a, ENDPOINT) == f"box-a · llama-server\n{stack.servers[0].removeprefix('http://')}"
        health, version = table.cell_text(a, HEALTH).split("\n")
        assert health == "● up" and version
        assert table.cell_text(a, MODEL) == "SmolLM2-135M-Instruct.Q4_1"  # the served file's name, not its path
        assert (table.cell_text(a, SLOTS), table.cell_text(a, QUEUE)) == ("0/2", "0")
        assert table.cell_text(a, TOKENS) in ("0.0", "—")
        assert table.cell_text(a, GPU) == "17.8 / 24.0 GiB\n87 % busy"
        assert table.cell_text(a, RAM) == "38 GiB free\nof 62 GiB"
        assert table.cell_text(a, SOURCE) == "Prometheus: DCGM"
        assert table.cell_text(table.row_of("box-b"), GPU) == "16.7 / 24.0 GiB\n41 % busy"
        # The down server: its health, and why in its model's place and under the table.
        assert table.cell_text(c, HEALTH) == "● unreachable"
        assert nobody in table.cell_text(c, MODEL) and table.cell_text(c, SLOTS) == "—"
        assert page.down_label.isVisible() and page.down_label.message.startswith("box-c: unreachable — ")
        assert table.cell_text(c, SOURCE) == "Prometheus: ollama-deck exporter"  # its host is still known
        # The balancer's row: its health through nginx, the sums of the servers behind it.
        assert table.cell_text(balancer, ENDPOINT) == f"nginx · balancer\n{stack.balancer_url.removeprefix('http://')}"
        assert table.cell_text(balancer, HEALTH).startswith("● up\n") and table.cell_text(balancer, SLOTS) == "0/4"
        assert table.cell_text(balancer, SOURCE) == "sums of box-a, box-b"
        # The PromQL in use, each once.
        queries = page.queries_view.toPlainText().splitlines()
        assert 'DCGM_FI_DEV_FB_USED{Hostname="box-a"} or DCGM_FI_DEV_FB_USED{instance=~"(box-a)(:[0-9]+)?"}' in queries
        assert 'node_memory_MemTotal_bytes{instance=~"(box-b)(:[0-9]+)?"}' in queries
        assert len(queries) == len(set(queries))
        assert any(q.startswith("ollama_deck_gpu_memory_used_bytes") for q in queries)
        assert page.prometheus_label.text().startswith(
            f"Prometheus at {stack.prometheus_url} (7 scrape targets up), GET /api/v1/query")
        # A row keeps its history: the sparkline has one value a poll.
        assert len(table.sparklines["box-a"].values) == page.polls
    finally:
        page.shutdown()
    assert page.feed is not None and not page.feed.running


def test_without_a_fleet_file_the_page_shows_how_to_write_one(qtbot, page_context) -> None:
    page = _page(qtbot, page_context, None)
    page.show()
    assert page.ready and page.feed is None and not page.table.isVisible()
    example = page.example_view.toPlainText()
    assert '[[server]]\nname = "box-a"' in example and "[balancer]" in example and "[prometheus]" in example
    assert page.subtitle.text() == "no fleet file" and not page.problem.isVisible()


def test_a_fleet_file_that_cannot_be_used_is_said_with_its_line_and_the_example_stays(qtbot, page_context,
                                                                                    tmp_path: Path) -> None:
    path = tmp_path / "fleet.toml"
    path.write_text('[[server]]\nname = "a"\nurl = "ftp://127.0.0.1:1"\nbackend = "llama_server"\n')
    page = _page(qtbot, page_context, path)
    page.show()
    assert page.problem.isVisible() and page.problem.severity == "error"
    assert page.problem.message.startswith(f"The fleet file {path}: line 3, server[0].url: ")
    assert "write an http(s) URL" in page.problem.message and page.example_view.isVisible()


def test_targets_prometheus_cannot_scrape_are_named_with_their_errors() -> None:
    snapshot = FleetSnapshot((), targets=(
        ScrapeTarget("node-box-b", "box-b:9100", "http://box-b:9100/metrics", "down", "connection refused"),
        ScrapeTarget("dcgm", "box-a:9400", "http://box-a:9400/metrics", "up", "")))
    assert targets_text(snapshot) == "1 of 2 scrape targets down: node-box-b box-b:9100 (connection refused)"



def test_a_window_attached_at_the_balancer_sweeps_with_each_backend_behind_it(tmp_path: Path, page_context,
                                                                             qtbot) -> None:
    path = tmp_path / "fleet.toml"
    path.write_text(FLEET)
    page, fleet = fleet_page(page_context(), str(path), BACKENDS)
    qtbot.addWidget(page)
    page.shutdown()
    behind = behind_the_balancer(fleet, "http://127.0.0.1:8080", BACKENDS)
    assert [(b.name, b.url) for b in behind] == [("box-a", "http://127.0.0.1:8081"), ("box-b", "http://127.0.0.1:8082")]
    # Each is read through its own backend's telemetry, not the window's.
    assert behind[0].telemetry is registry.get("llama_server").server_telemetry
    assert behind[1].telemetry is registry.get("ollama").server_telemetry
    # Attached at one of the servers (or with no fleet), a sweep reads that server itself.
    assert behind_the_balancer(fleet, "http://127.0.0.1:8081", BACKENDS) == ()
    assert behind_the_balancer(None, "http://127.0.0.1:8080", BACKENDS) == ()
