"""`ollama-deck bench` at a balancer: Debian's real nginx in front of two real embedded llama-servers, the
sweep run through the real entry point (`python -m app bench … --json -`), each backend's share read from
that backend's own counters and checked against nginx's access log (which the app never reads)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.backends.llama_server.engine_server import RunningServer
from tests.backends.llama_server.engine_server import stop
from tests.fleet_fixtures import LLAMA_FLAGS, Method, NginxBalancer
from tests.backends.llama_server.engine_server import llama_server

PROJECT_ROOT = Path(__file__).resolve().parents[2]
# Short replies, no warm-up: nginx's log then holds exactly the counted requests.
WORKLOAD = ("--no-think", "--num-predict", "16", "--warmup", "0")
pytestmark = pytest.mark.engine


def bench(balancer: NginxBalancer, model: Path, behind: list[str], tmp_path: Path, *extra: str,
          on_stderr_line: Callable[[str], None] | None = None) -> tuple[dict[str, Any], str]:
    """`python -m app bench` at the balancer with its backends behind it; the JSON (stdout) and stderr."""
    command = [sys.executable, "-m", "app", "bench", "--url", balancer.base_url, "--backend", "llama_server",
               "--model", str(model), *[x for url in behind for x in ("--behind", url)],
               "--config-dir", str(tmp_path / "cfg"),
               "--no-history", "--json", "-", *extra]
    process = subprocess.Popen(command, env=dict(os.environ, PYTHONPATH=str(PROJECT_ROOT)), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    err: list[str] = []

    def read_stderr() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            err.append(line)
            if on_stderr_line is not None:
                on_stderr_line(line)

    reader = threading.Thread(target=read_stderr)
    reader.start()
    try:
        assert process.stdout is not None
        out = process.stdout.read()  # until the command ends (pytest's timeout bounds it)
        process.wait(timeout=60)
    finally:
        stop(process)
        reader.join(timeout=30)
    assert process.returncode == 0, "".join(err)
    return json.loads(out), "".join(err)


def shares(point: dict[str, Any], figure: str = "generated_tokens") -> dict[str, float]:
    return {b["name"]: b[figure]["share_pct"] for b in point["balance"]["backends"]}


def test_round_robin_spreads_evenly_and_the_counters_agree_with_nginx(
        backend_pair: tuple[RunningServer, RunningServer], balancer_over, bundled_model: Path, tmp_path: Path) -> None:
    a, b = backend_pair
    balancer = balancer_over([a.base_url, b.base_url], Method.ROUND_ROBIN)
    data, err = bench(balancer, bundled_model, [f"a={a.base_url}", f"b={b.base_url}"], tmp_path,
                      *WORKLOAD, "--concurrency", "1,2", "--requests", "8")
    # The table printed (on stderr, as the JSON went to stdout) has the column and the shares.
    assert "Behind the balancer" in err
    counted = 0
    for point in data["points"]:
        assert point["requests_ok"] == 8, point
        balance = point["balance"]
        for backend in balance["backends"]:
            # llama-server keeps no request counter: said so, never made up from the client's view
            assert backend["requests"]["source"] == "unavailable"
            assert "not counted by this server" in backend["requests"]["why"]
            assert backend["generated_tokens"]["source"] == "server_counter"
        assert balance["measure"] == "generated_tokens"
        # Streamed through nginx unbuffered: tokens arrive one by one, not all at the end of the reply (buffered,
        # time per output token would be about 0; the CPU model takes several ms a token however busy the machine).
        assert point["tpot_ms_p50"] >= 1.0 and point["e2e_ms_p50"] - point["ttft_ms_p50"] >= 15.0, point
        assert balance["verdict"] == "even", balance
        # Both backends' counters together hold every generated token the client received.
        assert sum(x["generated_tokens"]["value"] for x in balance["backends"]) == point["output_tokens"]
        counted += 8
    # nginx's own log (read by the test only): both upstreams served chat requests, about half each, and the
    # backends' token shares are within a request or two of its split.
    by_upstream = balancer.chat_counts()
    assert sum(by_upstream.values()) == counted
    names = {a.base_url.split("//")[1]: "a", b.base_url.split("//")[1]: "b"}
    total = {"a": 0.0, "b": 0.0}
    for point in data["points"]:
        for backend in point["balance"]["backends"]:
            total[backend["name"]] += backend["generated_tokens"]["value"]
    for upstream, name in names.items():
        logged_pct = by_upstream[upstream] / counted * 100
        counter_pct = total[name] / sum(total.values()) * 100
        assert abs(logged_pct - counter_pct) <= 2 / counted * 100 + 5, (by_upstream, total)


def test_weights_3_to_1_show_as_uneven(backend_pair: tuple[RunningServer, RunningServer], balancer_over,
                                       bundled_model: Path, tmp_path: Path) -> None:
    a, b = backend_pair
    balancer = balancer_over([a.base_url, b.base_url], Method.ROUND_ROBIN, [3, 1])
    data, err = bench(balancer, bundled_model, [f"a={a.base_url}", f"b={b.base_url}"], tmp_path,
                      *WORKLOAD, "--concurrency", "2", "--requests", "12")
    point = data["points"][0]
    assert point["balance"]["verdict"] == "uneven", point["balance"]
    share = shares(point)
    assert share["a"] > 60 and share["b"] < 40, share
    assert "UNEVEN" in err  # the table's cell says it
    counts = balancer.chat_counts()
    assert counts[a.base_url.split("//")[1]] == 9 and counts[b.base_url.split("//")[1]] == 3, counts


def test_a_backend_stopped_mid_run_is_unavailable_and_the_run_goes_on(
        llama_server_binary: Path, bundled_model: Path, balancer_over, tmp_path: Path) -> None:
    with llama_server(llama_server_binary, bundled_model, tmp_path, LLAMA_FLAGS) as a, \
            llama_server(llama_server_binary, bundled_model, tmp_path, LLAMA_FLAGS) as b:
        balancer = balancer_over([a.base_url, b.base_url], Method.ROUND_ROBIN)
        stopped = threading.Event()

        def stop_b_while_measuring(line: str) -> None:
            # the first point's measuring has begun: stop b (SIGTERM, as a machine going away would)
            if "measuring" in line and not stopped.is_set():
                stopped.set()
                b.process.send_signal(signal.SIGTERM)

        data, _err = bench(balancer, bundled_model, [f"a={a.base_url}", f"b={b.base_url}"], tmp_path,
                           *WORKLOAD, "--concurrency", "1,2", "--requests", "6", on_stderr_line=stop_b_while_measuring)
        assert stopped.is_set()
    first, second = data["points"]
    # nginx passed b's share to a: every request of both points was answered
    assert first["requests_ok"] + first["requests_failed"] == 6 and second["requests_ok"] == 6, (first, second)
    for point in (first, second):
        by_name = {x["name"]: x for x in point["balance"]["backends"]}
        assert by_name["b"]["generated_tokens"]["source"] == "unavailable"
        assert "did not answer" in by_name["b"]["generated_tokens"]["why"]
        assert by_name["a"]["generated_tokens"]["source"] == "server_counter"
        assert point["balance"]["verdict"] == "unknown"
    assert by_name["a"]["generated_tokens"]["value"] == second["output_tokens"]  # a served all of the second


def test_a_scenario_through_least_conn_has_each_backends_share(
        backend_pair: tuple[RunningServer, RunningServer], balancer_over, bundled_model: Path, tmp_path: Path) -> None:
    a, b = backend_pair
    balancer = balancer_over([a.base_url, b.base_url], Method.LEAST_CONN)
    assert "least_conn;" in balancer.conf.read_text()
    data, _err = bench(balancer, bundled_model, [f"a={a.base_url}", f"b={b.base_url}"], tmp_path,
                       "--scenario", "customer-qa", "--scale-lengths", "0.05", "--requests", "8", "--concurrency", "4",
                       "--warmup", "0")
    [point] = data["points"]
    balance = point["balance"]
    assert point["requests_ok"] == 8 and balance["verdict"] != "unknown", balance
    generated = [x["generated_tokens"] for x in balance["backends"]]
    assert all(g["source"] == "server_counter" for g in generated)
    assert sum(g["value"] for g in generated) == point["output_tokens"]
    assert sum(g["share_pct"] for g in generated) == pytest.approx(100.0)
    assert sum(balancer.chat_counts().values()) == 8


def test_managed_balancer_is_refused_with_the_reason(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "app", "bench", "--url", "http://127.0.0.1:9", "--managed",
                             "--backend", "llama_server", "--model", "m", "--behind", "http://127.0.0.1:8",
                             "--config-dir", str(tmp_path / "cfg"), "--no-history"],
                            env=dict(os.environ, PYTHONPATH=str(PROJECT_ROOT)), capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 2
    assert "cannot restart them per point" in result.stderr and "--managed" in result.stderr
