"""What the supervisor checks before it acts: where `ollama` is, whether host:port accepts
connections, whether what answers there is Ollama, and which log line explains a failure."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from urllib.parse import urlsplit

from app.adapters.process import procs
from app.backends.ollama.client import OllamaClient
from app.core.errors import ServerError
from app.core.server.process import ProcessSignature

PROBE_TIMEOUT_S = 2.0
# `ollama serve`, as the process table shows it; the Ollama desktop app (Linux/macOS/Windows) and the
# install script's systemd unit run it for the user.
OLLAMA_PROCESS = ProcessSignature(
    names=frozenset({"ollama", "ollama.exe"}), label="ollama serve", subcommand="serve",
    systemd_unit="ollama.service", desktop_apps=frozenset({"ollama app", "ollama app.exe", "Ollama"}),
)

INSTALL_HINT = (
    "Install Ollama from https://ollama.com/download (Linux: `curl -fsSL https://ollama.com/install.sh | sh`), "
    "or set the path to the `ollama` program on the Server page (Paths & advanced)."
)

_ERROR_PREFIXES = ("Error:", "panic:", "fatal error:")


def find_binary(configured: str, which: Callable[[str], str | None]) -> tuple[str | None, str]:
    """The `ollama` path (the preference if set, else PATH) and, when there is none, why."""
    configured = configured.strip()
    if configured:
        path = os.path.expanduser(configured)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path, ""
        return None, (
            f"The ollama binary set on the Server page ({configured}) does not exist or is not "
            f"executable. Fix that path, or clear it to search PATH. {INSTALL_HINT}"
        )
    found = which("ollama")
    if found:
        return found, ""
    return None, f"Ollama is not installed (no `ollama` program on PATH). {INSTALL_HINT}"


async def port_accepts(base_url: str, timeout_s: float = PROBE_TIMEOUT_S) -> bool:
    """True when something accepts TCP connections at the URL's host:port (timeout in seconds)."""
    parts = urlsplit(base_url)
    return await procs.port_accepts(parts.hostname or "", parts.port or 0, timeout_s)


async def identify(client: OllamaClient, timeout_s: float = PROBE_TIMEOUT_S) -> tuple[bool, str | None]:
    """Whether the client's URL answers like Ollama, and its version if it says; closes the client."""
    try:
        try:
            is_ollama = await asyncio.wait_for(client.is_ollama(), timeout_s)
        except (TimeoutError, ServerError, OSError):
            return False, None
        if not is_ollama:
            return False, None
        try:
            version = await asyncio.wait_for(client.version(), timeout_s)
        except (TimeoutError, ServerError, OSError):
            version = None
        return True, version_text(version)
    finally:
        await client.aclose()


def version_text(version: object) -> str | None:
    """A version string from the client's answer ('0.12.6' or {'version': '0.12.6'})."""
    if isinstance(version, str):
        return version or None
    if isinstance(version, dict):
        value = version.get("version")
        return str(value) if value else None
    return None


def reason_line(tail: tuple[str, ...]) -> str:
    """The log line that best explains a failure: the last error or panic, else the last line."""
    for line in reversed(tail):
        if line.startswith(_ERROR_PREFIXES) or "level=ERROR" in line:
            return line
    return next((line for line in reversed(tail) if line.strip()), "")
