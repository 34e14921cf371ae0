"""The server's lifecycle as the app sees it, as immutable snapshots."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class ServerState(enum.Enum):
    NOT_INSTALLED = "not installed"
    STOPPED = "stopped"
    STARTING = "starting"
    RUNNING_MANAGED = "running (managed)"
    RUNNING_ATTACHED = "running (attached)"
    STOPPING = "stopping"
    CRASHED = "crashed"
    PORT_CONFLICT = "port taken"

    @property
    def is_running(self) -> bool:
        return self in (ServerState.RUNNING_MANAGED, ServerState.RUNNING_ATTACHED)


class ExternalKind(enum.Enum):
    """Who runs a server the app attached to."""

    SYSTEMD = "systemd service"
    TRAY_APP = "desktop app"  # the server's own desktop app, which runs it as its child
    OTHER = "another process"


@dataclass(frozen=True)
class ServerStatus:
    """One snapshot of the server: what state, whose it is, and what a user should know."""

    state: ServerState
    message: str = ""
    version: str | None = None
    pid: int | None = None
    exit_code: int | None = None
    last_log_lines: tuple[str, ...] = ()
    external_kind: ExternalKind | None = None
    apply_hint: str = ""  # for an attached server: how settings would be applied there
    binary: str | None = None
    # RUNNING_MANAGED for a server an earlier run of the app started and left behind, adopted again:
    # it can be stopped, but its log and exit code cannot be read.
    orphan: bool = False
    # The model file a one-model server serves ('' where the server lists what it has loaded instead).
    serving: str = ""
    # Who runs an attached server, in the backend's words (e.g. "systemd service"); '' for the app's own.
    run_by: str = ""

    @property
    def can_stop(self) -> bool:
        return self.state in (ServerState.RUNNING_MANAGED, ServerState.STARTING)

    @property
    def stop_disabled_reason(self) -> str:
        if self.state is ServerState.RUNNING_ATTACHED:
            who = self.run_by or "another process"
            return f"This server was started by {who}; ollama-deck never stops what it did not start."
        if not self.can_stop:
            return "No server managed by ollama-deck is running."
        return ""
