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
    TRAY_APP = "Ollama desktop app"
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

    @property
    def can_stop(self) -> bool:
        return self.state in (ServerState.RUNNING_MANAGED, ServerState.STARTING)

    @property
    def stop_disabled_reason(self) -> str:
        if self.state is ServerState.RUNNING_ATTACHED:
            who = self.external_kind.value if self.external_kind else "another process"
            return f"This server was started by {who}; ollama-deck never stops what it did not start."
        if not self.can_stop:
            return "No server managed by ollama-deck is running."
        return ""


def apply_hint_for(kind: ExternalKind, env: dict[str, str]) -> str:
    """How to apply settings to a server the app does not own, with the exact variables."""
    if kind is ExternalKind.SYSTEMD:
        lines = "\n".join(f'Environment="{k}={v}"' for k, v in sorted(env.items()))
        return (
            "Run `sudo systemctl edit ollama.service`, add under [Service]:\n"
            f"{lines}\nthen `sudo systemctl daemon-reload && sudo systemctl restart ollama`."
        )
    if kind is ExternalKind.TRAY_APP:
        lines = "\n".join(f"launchctl setenv {k} {v}" for k, v in sorted(env.items()))
        return (
            "Quit the Ollama desktop app (it restarts its server and kills other servers on its "
            "port), then start the server from ollama-deck to apply these settings. To keep the "
            "desktop app instead, give it these variables (macOS shown; on Windows set them as user "
            f"environment variables) and restart it:\n{lines}"
        )
    command = " ".join(f"{k}={_shell_quote(v)}" for k, v in sorted(env.items()))
    return (
        "Stop that server where it was started and start it again with these settings:\n"
        f"{command} ollama serve\nor stop it and start the server from ollama-deck."
    )


def _shell_quote(value: str) -> str:
    """Quote a value for a POSIX shell only when it needs it."""
    if value and all(c.isalnum() or c in "._-:/[]" for c in value):
        return value
    return "'" + value.replace("'", "'\\''") + "'"
