"""The log lines of the stand-in `ollama` program that come from Ollama's configuration: Go's slog
format, Go durations, and the `msg="server config"` line (0.32's variables as recorded from the real
0.32.15, tests/data/ollama/real/serve_default.log; 0.12's before 0.30)."""

from __future__ import annotations

import datetime
import json
import re
from collections.abc import Mapping
from pathlib import Path

from tests.fakes.ollama.fake_ollama_loadlog import runs_llama_server
from tests.fakes.ollama.recorded import real_version, recorded_log


# What the real server prints in its "server config" line besides the variables it was given.
_CONFIG_DEFAULTS: dict[str, str] = {
    "CUDA_VISIBLE_DEVICES": "", "GPU_DEVICE_ORDINAL": "", "HIP_VISIBLE_DEVICES": "",
    "HSA_OVERRIDE_GFX_VERSION": "", "HTTPS_PROXY": "", "HTTP_PROXY": "", "NO_PROXY": "",
    "OLLAMA_CONTEXT_LENGTH": "4096", "OLLAMA_DEBUG": "INFO", "OLLAMA_FLASH_ATTENTION": "false",
    "OLLAMA_GPU_OVERHEAD": "0", "OLLAMA_KEEP_ALIVE": "5m0s", "OLLAMA_KV_CACHE_TYPE": "",
    "OLLAMA_LLM_LIBRARY": "", "OLLAMA_LOAD_TIMEOUT": "5m0s", "OLLAMA_MAX_LOADED_MODELS": "0",
    "OLLAMA_MAX_QUEUE": "512", "OLLAMA_MODELS": str(Path.home() / ".ollama" / "models"),
    "OLLAMA_MULTIUSER_CACHE": "false", "OLLAMA_NEW_ENGINE": "false", "OLLAMA_NOHISTORY": "false",
    "OLLAMA_NOPRUNE": "false", "OLLAMA_NUM_PARALLEL": "1",
    "OLLAMA_ORIGINS": "[http://localhost https://localhost http://localhost:* https://localhost:* "
                      "http://127.0.0.1 https://127.0.0.1 http://127.0.0.1:* https://127.0.0.1:* "
                      "http://0.0.0.0 https://0.0.0.0 http://0.0.0.0:* https://0.0.0.0:* app://* "
                      "file://* tauri://* vscode-webview://* vscode-file://*]",
    "OLLAMA_REMOTES": "[ollama.com]", "OLLAMA_SCHED_SPREAD": "false", "OLLAMA_VULKAN": "false",
    "ROCR_VISIBLE_DEVICES": "", "http_proxy": "", "https_proxy": "", "no_proxy": "",
}

def _now() -> str:
    stamp = datetime.datetime.now().astimezone().isoformat(timespec="milliseconds")
    return stamp.replace("+00:00", "Z")


def _quote(value: str) -> str:
    return json.dumps(value) if (not value or re.search(r'[\s"=]', value)) else value


def slog_line(level: str, source: str, msg: str, **attrs: object) -> str:
    """One line in the format of Go's slog text handler, as `ollama serve` writes it."""
    parts = [f"time={_now()}", f"level={level}", f"source={source}", f"msg={_quote(msg)}"]
    parts += [f"{key}={_quote(str(value))}" for key, value in attrs.items()]
    return " ".join(parts)


def go_duration(text: str) -> str:
    """A keep-alive value as Go prints a time.Duration ('5m' -> '5m0s', '-1' -> forever)."""
    units = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
    t = text.strip()
    if re.fullmatch(r"-?\d+", t):
        seconds = float(t)
    else:
        found = re.findall(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)", t)
        if not found:
            return "5m0s"
        seconds = sum(float(n) * units[u] for n, u in found) * (-1 if t.startswith("-") else 1)
    if seconds < 0:
        return "2562047h47m16.854775807s"  # Ollama turns a negative keep-alive into "forever"
    hours, rest = divmod(int(seconds), 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    return f"{minutes}m{secs}s" if minutes else f"{secs}s"


def _recorded_config_defaults() -> dict[str, str]:
    """The variables (with their defaults) of the real 0.32.15's "server config" line, as recorded."""
    line = next(line for line in recorded_log("default") if 'msg="server config"' in line)
    body = re.search(r'env="map\[(.*)\]"', line)
    assert body is not None, line
    text = body.group(1)
    names = list(re.finditer(r"(?:(?<=^)|(?<= ))([A-Z][A-Z0-9_]*|http_proxy|https_proxy|no_proxy):", text))
    config = {}
    for index, found in enumerate(names):
        end = names[index + 1].start() - 1 if index + 1 < len(names) else len(text)
        config[found.group(1)] = text[found.end():end]
    # What the recording machine's environment gave, not a default.
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "OLLAMA_HOST"):
        config[name] = ""
    config["OLLAMA_MODELS"] = str(Path.home() / ".ollama" / "models")
    return config


def server_config_line(env: Mapping[str, str], host: str, port: int, version: str | None = None) -> str:
    """The `msg="server config"` line with the environment the server really got (0.32's variables
    from 0.30 on, 0.12's before)."""
    config = _recorded_config_defaults() if runs_llama_server(version or real_version()) else dict(_CONFIG_DEFAULTS)
    for key in config:
        if key in env and key not in ("OLLAMA_KEEP_ALIVE", "OLLAMA_FLASH_ATTENTION"):
            config[key] = env[key]
    if "OLLAMA_KEEP_ALIVE" in env:
        config["OLLAMA_KEEP_ALIVE"] = go_duration(env["OLLAMA_KEEP_ALIVE"])
    if env.get("OLLAMA_FLASH_ATTENTION", "").lower() in ("1", "true"):
        config["OLLAMA_FLASH_ATTENTION"] = "true"
    config["OLLAMA_HOST"] = f"http://{host}:{port}"
    body = " ".join(f"{key}:{config[key]}" for key in sorted(config))
    return slog_line("INFO", "routes.go:1511", "server config", env=f"map[{body}]")
