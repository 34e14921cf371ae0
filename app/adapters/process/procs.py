"""Process helpers for the server supervisor: who listens on a port, who runs it, and killing
exactly the process tree we started (never by name)."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Iterable

import psutil

from app.core.server.process import ProcessSignature
from app.core.server.state import ExternalKind

WILDCARD_ADDRESSES = frozenset({"0.0.0.0", "::", ""})


@dataclass(frozen=True)
class Listener:
    """What psutil can tell about the process listening on a port."""

    pid: int | None  # None when the socket belongs to another user (psutil cannot see it)
    description: str  # e.g. "nginx (pid 812)" or "another program"


def _normalise_host(host: str) -> str:
    return host.strip("[]")


def _addresses_overlap(listen_ip: str, host: str) -> bool:
    if listen_ip in WILDCARD_ADDRESSES or host in WILDCARD_ADDRESSES:
        return True
    if host == "localhost":
        return listen_ip in ("127.0.0.1", "::1")
    return listen_ip == host


async def port_accepts(host: str, port: int, timeout_s: float) -> bool:
    """True when something accepts TCP connections on host:port within timeout_s seconds."""
    try:
        _reader, writer = await asyncio.wait_for(asyncio.open_connection(host.strip("[]"), port), timeout_s)
    except (TimeoutError, OSError):
        return False
    writer.close()
    try:
        await writer.wait_closed()
    except OSError:
        pass
    return True


def loopback_port_holder(port: int) -> str | None:
    """None when a TCP server could bind `port` on 127.0.0.1 now (tested by binding it there, and only there);
    else who holds it, e.g. "nginx (pid 812)", or "another program" when that cannot be seen."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # As servers do: a port whose last connections linger in TIME_WAIT is free to them.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            pass
        else:
            return None
    listener = find_listener("127.0.0.1", port)
    return listener.description if listener is not None else "another program"


def find_listener(host: str, port: int) -> Listener | None:
    """The process listening on host:port, None when no listening socket is visible."""
    host = _normalise_host(host)
    try:
        connections = psutil.net_connections(kind="tcp")
    except (psutil.AccessDenied, PermissionError, OSError):
        return Listener(None, "another program (this system does not say which)")
    for conn in connections:
        if conn.status != psutil.CONN_LISTEN or not conn.laddr or conn.laddr.port != port:
            continue
        if not _addresses_overlap(conn.laddr.ip, host):
            continue
        if conn.pid is None:
            return Listener(None, "a process of another user (ollama-deck cannot see which)")
        return Listener(conn.pid, describe_process(conn.pid))
    return None


def listening_pids(host: str, port: int) -> set[int] | None:
    """Pids of every process seen listening on host:port (a wildcard bind elsewhere may share the
    port with a loopback one); None when this system does not say who owns its sockets."""
    host = _normalise_host(host)
    try:
        connections = psutil.net_connections(kind="tcp")
    except (psutil.AccessDenied, PermissionError, OSError):
        return None
    return {conn.pid for conn in connections
            if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port
            and _addresses_overlap(conn.laddr.ip, host) and conn.pid is not None}


def server_pids(server: ProcessSignature) -> list[int]:
    """Pids of the processes that run `server` (any user; names are public on Linux).

    Used only to identify a server whose socket psutil cannot attribute (a systemd service runs
    as its own user), never to choose what to signal."""
    found = []
    for proc in psutil.process_iter(["name", "cmdline"]):
        if server.matches(proc.info.get("name") or "", proc.info.get("cmdline") or []):
            found.append(proc.pid)
    return found


def runs(pid: int, server: ProcessSignature) -> bool:
    """True when the process `pid` runs `server` (False when it is gone or hidden)."""
    try:
        proc = psutil.Process(pid)
        return server.matches(proc.name(), proc.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return False


def identify_listener(host: str, port: int, server: ProcessSignature) -> Listener | None:
    """find_listener, falling back to the only process running `server` when the socket's owner is hidden."""
    listener = find_listener(host, port)
    if listener is None or listener.pid is not None:
        return listener
    candidates = server_pids(server)
    if len(candidates) == 1:
        return Listener(candidates[0], f"{server.label} (pid {candidates[0]})")
    return listener


def describe_process(pid: int) -> str:
    """A short human name for a process: 'nginx (pid 812)'."""
    try:
        proc = psutil.Process(pid)
        name = proc.name()
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return f"pid {pid}"
    return f"{name} (pid {pid})"


def classify_external(cgroup_text: str, ancestor_names: Iterable[str], server: ProcessSignature) -> ExternalKind:
    """Who runs a server, from its /proc/<pid>/cgroup text and its ancestors' process names."""
    if server.systemd_unit and server.systemd_unit in cgroup_text:
        return ExternalKind.SYSTEMD
    if any(name in server.desktop_apps for name in ancestor_names):
        return ExternalKind.TRAY_APP
    return ExternalKind.OTHER


def external_kind_of(pid: int | None, server: ProcessSignature) -> ExternalKind:
    """Classify the process behind an attached server; OTHER when it cannot be inspected."""
    if pid is None:
        return ExternalKind.OTHER
    try:
        cgroup_text = Path(f"/proc/{pid}/cgroup").read_text(errors="replace")
    except OSError:
        cgroup_text = ""
    names: list[str] = []
    try:
        for parent in psutil.Process(pid).parents():
            try:
                names.append(parent.name())
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        pass
    return classify_external(cgroup_text, names, server)


def tree_of(root: psutil.Process) -> list[psutil.Process]:
    """The root and all its live descendants (children first is not guaranteed)."""
    procs = [root]
    try:
        procs.extend(root.children(recursive=True))
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        pass
    return procs


def group_leftovers(leader: psutil.Process) -> list[psutil.Process]:
    """Processes still in the leader's process group (runners orphaned when the server died).

    The server is started in its own session, so its pid is the group id of everything it
    spawned; Linux keeps that id reserved while any member lives, so a match is ours.
    """
    try:
        since = leader.create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return []
    return group_members(leader.pid, since)


def group_members(pgid: int, since: float, slack_s: float = 0.01) -> list[psutil.Process]:
    """Live processes (not this one, not pgid itself) in process group pgid that started no earlier
    than `since` (seconds since the epoch, less slack_s): what a leader started at `since` left.

    Works after the leader is gone too: the kernel keeps a group id from being reused as a pid while
    any member lives, so the members found are the leader's own."""
    if not hasattr(os, "getpgid"):
        return []
    found = []
    for proc in psutil.process_iter(["create_time"]):
        if proc.pid in (pgid, os.getpid()):
            continue
        try:
            if os.getpgid(proc.pid) != pgid:
                continue
        except OSError:
            continue
        created = proc.info.get("create_time")
        if created is not None and created + slack_s >= since:
            found.append(proc)
    return alive(found)


def signal_all(procs: Iterable[psutil.Process], sig: int) -> None:
    """Send a signal to each process that is still the one we recorded (psutil checks reuse)."""
    for proc in procs:
        try:
            proc.send_signal(sig)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, ProcessLookupError):
            continue


def alive(procs: Iterable[psutil.Process]) -> list[psutil.Process]:
    """Those processes still running and not zombies."""
    result = []
    for proc in procs:
        try:
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                result.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return result


async def kill_and_wait(procs: Iterable[psutil.Process], timeout_s: float = 2.0) -> list[psutil.Process]:
    """SIGKILL the given processes and wait up to timeout_s seconds; returns any still alive."""
    procs = list(procs)
    signal_all(procs, signal.SIGKILL)
    deadline = time.monotonic() + timeout_s
    remaining = alive(procs)
    while remaining and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
        remaining = alive(remaining)
    return remaining


def signal_name(returncode: int) -> str:
    """'SIGKILL' for a negative asyncio return code -9."""
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"
