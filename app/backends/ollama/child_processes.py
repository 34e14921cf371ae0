"""Finds Ollama's llama-server child in the process table, for an attached Ollama whose log the app
may not read (a server run in a terminal, a systemd service whose journal needs a group the user is
not in): the child's own command line, readable in /proc by every user on a default Linux, names its
port as surely as the log line does. Runs beside the log follower while the app is attached."""

from __future__ import annotations

import asyncio
from pathlib import PurePath

import psutil

from app.backends.ollama.child import ChildCommand, ChildWatch, command_from_argv

SCAN_INTERVAL_S = 2.0  # a new child (a reload) is found within this; a scan costs one walk of the tree


def llama_server_children(pid: int) -> list[tuple[int, ChildCommand]] | None:
    """The llama-server processes below pid that serve on a port, oldest first, as (pid, command);
    None when pid is gone or its children cannot be listed."""
    try:
        below = psutil.Process(pid).children(recursive=True)
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None
    found: list[tuple[float, int, ChildCommand]] = []
    for proc in below:
        try:
            argv = proc.cmdline()
            started = proc.create_time()
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        if not argv or not PurePath(argv[0]).name.startswith("llama-server"):
            continue
        command = command_from_argv(argv)
        if command is not None:
            found.append((started, proc.pid, command))
    return [(child_pid, command) for _, child_pid, command in sorted(found, key=lambda f: (f[0], f[1]))]


async def follow_child_processes(pid: int, watch: ChildWatch, interval_s: float = SCAN_INTERVAL_S) -> None:
    """Tell `watch` what llama-server children the server at pid has, every interval_s, until
    cancelled (or until the server's process is gone)."""
    while True:
        children = await asyncio.to_thread(llama_server_children, pid)
        if children is None:
            return
        watch.saw_processes(children)
        await asyncio.sleep(interval_s)


__all__ = ["SCAN_INTERVAL_S", "follow_child_processes", "llama_server_children"]
