"""Process helpers of the supervisor: classifying who runs a server, finding a port's listener."""

from __future__ import annotations

import os
import socket

import pytest

from app.adapters.process.procs import (
    classify_external,
    external_kind_of,
    find_listener,
    server_pids,
)
from app.backends.ollama.probe import OLLAMA_PROCESS
from app.core.server.state import ExternalKind


@pytest.mark.parametrize(
    ("cgroup", "ancestors", "kind"),
    [
        ("0::/system.slice/ollama.service\n", ["systemd"], ExternalKind.SYSTEMD),
        ("12:pids:/system.slice/ollama.service\n1:name=systemd:/system.slice/ollama.service\n", [],
         ExternalKind.SYSTEMD),
        ("0::/user.slice/user-1000.slice/session-2.scope\n", ["ollama app", "systemd"], ExternalKind.TRAY_APP),
        ("", ["Ollama", "launchd"], ExternalKind.TRAY_APP),
        ("", ["ollama app.exe", "explorer.exe"], ExternalKind.TRAY_APP),
        ("0::/user.slice/user-1000.slice/session-2.scope\n", ["bash", "sshd", "systemd"], ExternalKind.OTHER),
        ("0::/system.slice/docker-4f1c.scope\n", ["containerd-shim", "systemd"], ExternalKind.OTHER),
    ],
)
def test_classify_external(cgroup: str, ancestors: list[str], kind: ExternalKind) -> None:
    assert classify_external(cgroup, ancestors, OLLAMA_PROCESS) is kind


def test_unknown_pid_is_other() -> None:
    assert external_kind_of(None, OLLAMA_PROCESS) is ExternalKind.OTHER


def test_find_listener_names_this_process() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        port = sock.getsockname()[1]

        listener = find_listener("127.0.0.1", port)

        assert listener is not None and listener.pid == os.getpid()
        assert f"(pid {os.getpid()})" in listener.description
        assert find_listener("0.0.0.0", port) is not None


def test_find_listener_on_a_free_port_is_none() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound but not listening
        assert find_listener("127.0.0.1", port) is None


def test_ollama_serve_processes_are_recognised(external_standin) -> None:
    ext = external_standin()

    pids = server_pids(OLLAMA_PROCESS)

    assert ext.pid in pids
    assert not set(ext.runner_pids()) & set(pids)  # `ollama runner` is not a server
