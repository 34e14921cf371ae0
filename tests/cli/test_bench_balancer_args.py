"""`bench --behind` and `bench --fleet`: the backends behind a balancer as the command line or a fleet file names
them, and each mistake refused in one line (exit 2) before anything is measured."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from app.cli.bench_balancer import BehindArg, balancer_backends
from app.cli.checks import ArgProblem
from tests.cli.test_bad_input import one_line_exit_2

FLEET = """
[[server]]
name = "box-a"
url = "http://127.0.0.1:8081"
backend = "llama_server"

[[server]]
name = "box-b"
url = "http://127.0.0.1:8082"
backend = "ollama"

[[server]]
name = "elsewhere"
url = "http://127.0.0.1:8083"
backend = "llama_server"

[balancer]
name = "nginx"
url = "http://127.0.0.1:8080"
servers = ["box-a", "box-b"]
"""


def args(*behind: str, url: str | None = "http://127.0.0.1:8080", fleet: str | None = None, managed: bool = False,
         backend: str | None = "llama_server") -> argparse.Namespace:
    return argparse.Namespace(behind=list(behind) or None, url=url, fleet=fleet, managed=managed, demo=False,
                              backend=backend)


def test_behind_takes_a_name_a_url_and_a_backend_kind() -> None:
    url, backends = balancer_backends(args("a=http://127.0.0.1:8081", "http://127.0.0.1:8082@ollama",
                                           "c=http://127.0.0.1:8083/@llama_server"))
    assert url is None  # --url's own
    assert backends == (BehindArg("a", "http://127.0.0.1:8081", "llama_server"),
                        BehindArg("127.0.0.1:8082", "http://127.0.0.1:8082", "ollama"),
                        BehindArg("c", "http://127.0.0.1:8083", "llama_server"))
    assert balancer_backends(args()) == (None, ())  # no balancer: the sweep measures one server


def test_a_fleet_files_balancer_gives_the_url_and_the_servers_behind_it(tmp_path: Path) -> None:
    fleet = tmp_path / "fleet.toml"
    fleet.write_text(FLEET)
    url, backends = balancer_backends(args(url=None, fleet=str(fleet)))
    assert url == "http://127.0.0.1:8080"
    assert backends == (BehindArg("box-a", "http://127.0.0.1:8081", "llama_server"),
                        BehindArg("box-b", "http://127.0.0.1:8082", "ollama"))
    # --url wins over the file's balancer URL; --behind adds to the file's servers
    url, backends = balancer_backends(args("x=http://127.0.0.1:9001", url="http://127.0.0.1:7000", fleet=str(fleet)))
    assert url is None and [b.name for b in backends] == ["x", "box-a", "box-b"]


@pytest.mark.parametrize(("given", "needle"), [
    (args("a=http://127.0.0.1:8081@vllm"), "'vllm' is not a backend"),
    (args("a=http://127.0.0.1:8081", "a=http://127.0.0.1:8082"), "two backends behind the balancer are named 'a'"),
    (args("a=ftp://127.0.0.1:8081"), "--behind a=ftp://127.0.0.1:8081"),
    (args("http://127.0.0.1:8081", url=None), "give the balancer's address with --url"),
    (args("http://127.0.0.1:8081", managed=True), "cannot restart them per point"),
])
def test_mistakes_in_behind_are_refused_with_the_reason(given: argparse.Namespace, needle: str) -> None:
    with pytest.raises(ArgProblem) as caught:
        balancer_backends(given)
    assert needle in str(caught.value)


def test_a_fleet_file_without_a_balancer_or_with_a_mistake_is_refused_in_one_line(tmp_path: Path) -> None:
    no_balancer = tmp_path / "servers.toml"
    no_balancer.write_text(FLEET.split("[balancer]")[0])
    common = ["bench", "--model", "m", "--config-dir", str(tmp_path / "cfg"), "--no-history"]
    one_line_exit_2([*common, "--fleet", str(no_balancer)], "--fleet", "has no [balancer] section")
    broken = tmp_path / "broken.toml"
    broken.write_text(FLEET.replace('servers = ["box-a", "box-b"]', 'servers = ["box-a", "box-c"]'))
    one_line_exit_2([*common, "--fleet", str(broken)], "--fleet", "'box-c' is not the name of a [[server]]")
    one_line_exit_2([*common, "--fleet", str(tmp_path / "missing.toml")], "--fleet", "no such file")
    one_line_exit_2([*common, "--url", "http://127.0.0.1:9", "--behind", "http://127.0.0.1:8", "--demo"],
                    "--behind", "cannot restart them per point")
