"""`ollama-deck bench --managed` beyond loopback: refused without the permission for that host, warned with it.

Real processes: the CLI, the stand-in `ollama` on PATH, a real settings file."""

from __future__ import annotations

import json
from pathlib import Path

from app.adapters.storage.settings_store import SettingsStore
from app.backends.ollama.tuning import OLLAMA_TUNING
from app.core.server.settings import ServerSettings
from tests.cli.test_bench_cli import bench
from tests.fakes.ollama.server_fixtures import free_port

WORKLOAD = ("--model", "qwen3:0.6b", "--managed", "--requests", "2", "--num-predict", "4", "--no-think",
            "--no-history", "--quiet")


def _save(tmp_path: Path, settings: ServerSettings) -> None:
    SettingsStore(tmp_path / "cfg", OLLAMA_TUNING).save(settings)


def _warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("ollama-deck bench: warning:")]


def test_with_the_saved_permission_for_that_host_it_warns_and_runs(tmp_path, standin_ollama):
    port = free_port()
    _save(tmp_path, ServerSettings(host="0.0.0.0", port=port, network_allowed_for="0.0.0.0"))
    result = bench(tmp_path, *WORKLOAD, "--url", f"http://0.0.0.0:{port}")
    assert result.returncode == 0, result.stderr
    [warning] = _warnings(result.stderr)
    assert f"0.0.0.0:{port}" in warning and "anyone who can reach" in warning and "delete your models" in warning
    assert "Recommended" in result.stdout


def test_without_permission_it_refuses_with_exit_2_and_one_line(tmp_path, standin_ollama):
    port = free_port()
    result = bench(tmp_path, *WORKLOAD, "--url", f"http://0.0.0.0:{port}")
    assert result.returncode == 2 and result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith(f"ollama-deck bench: Did not start the server on 0.0.0.0:{port}")
    assert "--allow-network" in line and f"--url http://127.0.0.1:{port}" in line


def test_a_permission_for_0000_does_not_open_another_host(tmp_path, standin_ollama):
    port = free_port()
    _save(tmp_path, ServerSettings(host="0.0.0.0", port=port, network_allowed_for="0.0.0.0"))
    result = bench(tmp_path, *WORKLOAD, "--url", f"http://192.168.1.5:{port}")
    assert result.returncode == 2
    [line] = result.stderr.splitlines()
    assert f"192.168.1.5:{port}" in line and "not allowed for 192.168.1.5" in line


def test_an_old_settings_file_allowing_the_network_still_allows_its_own_host(tmp_path, standin_ollama):
    port = free_port()
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "settings.json").write_text(json.dumps({
        "version": 2, "backend": "ollama", "backends": {"ollama": {}},
        "settings": {"host": "0.0.0.0", "port": port, "allow_network": True}}), "utf-8")
    result = bench(tmp_path, *WORKLOAD, "--url", f"http://0.0.0.0:{port}", "--parallel", "1")
    assert result.returncode == 0, result.stderr
    assert len(_warnings(result.stderr)) == 1


def test_a_wildcard_origin_counts_as_exposure_and_allow_network_lets_it_run(tmp_path, standin_ollama):
    port = free_port()
    _save(tmp_path, ServerSettings(port=port, extra_settings="OLLAMA_ORIGINS=*"))
    refused = bench(tmp_path, *WORKLOAD, "--url", f"http://127.0.0.1:{port}")
    assert refused.returncode == 2
    [line] = refused.stderr.splitlines()
    assert "any web page you open" in line and "OLLAMA_ORIGINS=*" in line and "--allow-network" in line
    result = bench(tmp_path, *WORKLOAD, "--url", f"http://127.0.0.1:{port}", "--allow-network")
    assert result.returncode == 0, result.stderr
    [warning] = _warnings(result.stderr)
    assert f"127.0.0.1:{port}" in warning and "any web page you open" in warning


def test_a_server_on_loopback_starts_without_a_warning(tmp_path, standin_ollama):
    result = bench(tmp_path, *WORKLOAD, "--url", f"http://127.0.0.1:{free_port()}")
    assert result.returncode == 0, result.stderr
    assert _warnings(result.stderr) == []
