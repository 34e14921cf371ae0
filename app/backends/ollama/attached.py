"""What ollama-deck says about an Ollama it attached to: who runs it (the systemd unit, the desktop
app, another process) and how the user applies settings there."""

from __future__ import annotations

from app.core.server.state import ExternalKind

# Who runs an attached Ollama, as its status and the pages say it.
RUN_BY = {ExternalKind.SYSTEMD: "systemd service", ExternalKind.TRAY_APP: "Ollama desktop app",
          ExternalKind.OTHER: "another process"}


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


__all__ = ["RUN_BY", "apply_hint_for"]
