"""Server settings: the real `ollama serve` knobs, their validation and their environment."""

from __future__ import annotations

import dataclasses
import ipaddress
import re
from dataclasses import dataclass, field, fields
from typing import Any

from app.core.units import MIB

SETTINGS_VERSION = 1

KV_CACHE_TYPES = ("f16", "q8_0", "q4_0")
FLASH_ATTENTION_MODES = ("auto", "on", "off")

# Variables the articles invented; none exists in any Ollama version.
INVENTED_VARIABLES: dict[str, str] = {
    "OLLAMA_MAX_BATCH_SIZE": "use parallel requests (OLLAMA_NUM_PARALLEL)",
    "OLLAMA_BATCH_SIZE": "use parallel requests (OLLAMA_NUM_PARALLEL), or num_batch per model",
    "OLLAMA_BATCH_TIMEOUT": "Ollama has no batching timeout",
    "OLLAMA_NUM_GPU": "num_gpu is a per-request/model option, not an environment variable",
    "OLLAMA_KV_CACHE_QUANTIZE": "use the KV-cache type (OLLAMA_KV_CACHE_TYPE)",
    "OLLAMA_NUM_BATCH": "num_batch is a per-request/model option (create a tuned variant)",
    "OLLAMA_NUM_CTX": "use context length (OLLAMA_CONTEXT_LENGTH)",
    "OLLAMA_FLASH_ATTN": "use flash attention (OLLAMA_FLASH_ATTENTION)",
}

# Variables the form owns; extra environment lines may not set them behind its back.
FORM_VARIABLES: dict[str, str] = {
    "OLLAMA_HOST": "host and port",
    "OLLAMA_NUM_PARALLEL": "parallel requests",
    "OLLAMA_CONTEXT_LENGTH": "context length",
    "OLLAMA_KV_CACHE_TYPE": "KV-cache type",
    "OLLAMA_FLASH_ATTENTION": "flash attention",
    "OLLAMA_KEEP_ALIVE": "keep-alive",
    "OLLAMA_MAX_LOADED_MODELS": "max loaded models",
    "OLLAMA_MAX_QUEUE": "max queue",
    "OLLAMA_GPU_OVERHEAD": "GPU overhead",
    "OLLAMA_MODELS": "models directory",
}

# Variables Ollama reads besides the ones the form owns; an OLLAMA_* name outside both is likely a typo.
OTHER_SERVER_VARIABLES = frozenset({
    "OLLAMA_LOAD_TIMEOUT", "OLLAMA_SCHED_SPREAD", "OLLAMA_ORIGINS", "OLLAMA_DEBUG",
    "OLLAMA_NOPRUNE", "OLLAMA_NOHISTORY", "OLLAMA_LLM_LIBRARY", "OLLAMA_MULTIUSER_CACHE",
    "OLLAMA_NEW_ENGINE", "OLLAMA_NEW_ESTIMATES", "OLLAMA_INTEL_GPU", "OLLAMA_VULKAN",
    "OLLAMA_TMPDIR", "OLLAMA_RUNNERS_DIR", "OLLAMA_REMOTES", "OLLAMA_NO_CLOUD",
})

# What each field is called in the form, for messages a user reads.
FIELD_LABELS: dict[str, str] = {
    "num_parallel": "Parallel requests",
    "context_length": "Context length",
    "kv_cache_type": "KV-cache type",
    "flash_attention": "Flash attention",
    "keep_alive": "Keep-alive",
    "max_loaded_models": "Max loaded models",
    "max_queue": "Max queue",
    "gpu_overhead_mib": "GPU overhead",
    "host": "Host",
    "port": "Port",
    "models_dir": "Models directory",
    "extra_env": "Extra environment",
    "ollama_binary": "ollama binary",
    "allow_network": "Allow network access",
}

# The environment variable behind each field (fields without one are app preferences).
FIELD_ENV_VARIABLES: dict[str, str] = {
    "num_parallel": "OLLAMA_NUM_PARALLEL",
    "context_length": "OLLAMA_CONTEXT_LENGTH",
    "kv_cache_type": "OLLAMA_KV_CACHE_TYPE",
    "flash_attention": "OLLAMA_FLASH_ATTENTION",
    "keep_alive": "OLLAMA_KEEP_ALIVE",
    "max_loaded_models": "OLLAMA_MAX_LOADED_MODELS",
    "max_queue": "OLLAMA_MAX_QUEUE",
    "gpu_overhead_mib": "OLLAMA_GPU_OVERHEAD",
    "host": "OLLAMA_HOST",
    "port": "OLLAMA_HOST",
    "models_dir": "OLLAMA_MODELS",
}

_DURATION_RE = re.compile(r"^-?(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$")
_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_HOSTNAME_RE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$")

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


@dataclass(frozen=True)
class ServerSettings:
    """Everything `ollama serve` reads at start, as the form edits it. None means Ollama's default."""

    num_parallel: int = 1
    context_length: int | None = None
    kv_cache_type: str = "f16"
    flash_attention: str = "auto"
    keep_alive: str = "5m"
    max_loaded_models: int = 0
    max_queue: int = 512
    gpu_overhead_mib: int = 0
    host: str = "127.0.0.1"
    port: int = 11434
    models_dir: str = ""
    extra_env: str = ""
    ollama_binary: str = ""  # preference: explicit path to `ollama`; empty = search PATH
    # Binding beyond loopback must be confirmed: Ollama's API has no authentication.
    allow_network: bool = False

    def replace(self, **changes: Any) -> ServerSettings:
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)

    @property
    def base_url(self) -> str:
        """The URL a client uses to reach this server (0.0.0.0 is reached through loopback)."""
        host = self.host
        if host in ("0.0.0.0", ""):
            host = "127.0.0.1"
        elif host == "::":
            host = "::1"
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}"

    @property
    def bind_address(self) -> str:
        """The OLLAMA_HOST value: host:port (IPv6 in brackets)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    @property
    def exposed_to_network(self) -> bool:
        """True when the server would listen beyond this machine (the API has no authentication)."""
        return self.host not in LOOPBACK_HOSTS

    def extra_env_pairs(self) -> list[tuple[str, str]]:
        """The extra environment lines as (name, value), skipping blanks and comments."""
        return [(name, value) for _, name, value, _ in _extra_env_lines(self.extra_env)]

    def to_env(self) -> dict[str, str]:
        """The OLLAMA_* environment for `ollama serve`; defaults are left unset so Ollama decides."""
        env: dict[str, str] = {"OLLAMA_HOST": self.bind_address}
        env["OLLAMA_NUM_PARALLEL"] = str(self.num_parallel)
        if self.context_length is not None:
            env["OLLAMA_CONTEXT_LENGTH"] = str(self.context_length)
        if self.kv_cache_type != "f16":
            env["OLLAMA_KV_CACHE_TYPE"] = self.kv_cache_type
        if self.flash_attention != "auto":
            env["OLLAMA_FLASH_ATTENTION"] = "1" if self.flash_attention == "on" else "0"
        if self.keep_alive != "5m":
            env["OLLAMA_KEEP_ALIVE"] = self.keep_alive
        if self.max_loaded_models:
            env["OLLAMA_MAX_LOADED_MODELS"] = str(self.max_loaded_models)
        if self.max_queue != 512:
            env["OLLAMA_MAX_QUEUE"] = str(self.max_queue)
        if self.gpu_overhead_mib:
            env["OLLAMA_GPU_OVERHEAD"] = str(self.gpu_overhead_mib * MIB)
        if self.models_dir:
            env["OLLAMA_MODELS"] = self.models_dir
        for name, value in self.extra_env_pairs():
            env[name] = value
        return env

    def to_json(self) -> dict[str, Any]:
        """A plain dict of the fields, for the settings file."""
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Any) -> tuple[ServerSettings, list[str]]:
        """Build from a dict; unknown keys and wrongly typed values are dropped and reported."""
        if not isinstance(data, dict):
            return cls(), [f"The settings are not a JSON object ({type(data).__name__}); using defaults."]
        problems: list[str] = []
        kwargs: dict[str, Any] = {}
        defaults = cls()
        for f in fields(cls):
            if f.name not in data:
                continue
            value = data[f.name]
            default = getattr(defaults, f.name)
            if f.name == "context_length":
                ok, wanted = value is None or _is_int(value), "a whole number of tokens or null"
            elif isinstance(default, bool):
                ok, wanted = isinstance(value, bool), "true or false"
            elif isinstance(default, int):
                ok, wanted = _is_int(value), "a whole number"
            else:
                ok, wanted = isinstance(value, str), "text"
            if ok:
                kwargs[f.name] = value
            else:
                problems.append(
                    f"{_label(f.name)}: {_short_repr(value)} is not {wanted}; "
                    f"using the default {_short_repr(default)}."
                )
        for key in sorted(set(data) - {f.name for f in fields(cls)}):
            problems.append(f"'{key}': not a setting this version knows; ignored.")
        return cls(**kwargs), problems


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _label(name: str) -> str:
    return f"{FIELD_LABELS.get(name, name)} ({name})"


def _short_repr(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _extra_env_lines(text: str) -> list[tuple[int, str, str, bool]]:
    """(line number, name, value, has '=') for each non-blank, non-comment line."""
    lines = []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.startswith("export "):
            stripped = stripped[len("export "):].strip()
        name, eq, value = stripped.partition("=")
        lines.append((number, name.strip(), value.strip().strip('"').strip("'"), bool(eq)))
    return lines


@dataclass(frozen=True)
class Validation:
    """Per-field problems: errors block Apply, warnings are shown but allowed."""

    errors: dict[str, str] = field(default_factory=dict)
    warnings: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.errors


def parse_keep_alive(text: str) -> float | None:
    """Seconds for a keep-alive value ('5m', '1h30m', '300', '-1'); None if unparsable. Negative = forever."""
    t = text.strip()
    if re.fullmatch(r"-?\d+", t):
        return float(int(t))
    if not _DURATION_RE.match(t):
        return None
    sign = -1.0 if t.startswith("-") else 1.0
    units = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
    total = 0.0
    for number, _, unit in re.findall(r"(\d+(\.\d+)?)(ns|us|µs|ms|s|m|h)", t):
        total += float(number) * units[unit]
    return sign * total


def _is_windows_absolute(path: str) -> bool:
    return bool(re.match(r"^([A-Za-z]:[\\/]|\\\\)", path))


def _host_problem(host: str) -> str:
    """Why a host cannot be bound, or ''."""
    if not host:
        return "Host is empty: use 127.0.0.1 for this machine only."
    if "://" in host:
        return "Write the host without a scheme, e.g. 127.0.0.1 (not http://…)."
    if re.fullmatch(r"[^:\[\]]+:\d+", host):
        return "Put the port in the Port field; Host takes only the address, e.g. 127.0.0.1."
    if not _valid_host(host):
        return "Host must be an IP address or a hostname, e.g. 127.0.0.1."
    return ""


def _check_extra_env(text: str) -> tuple[list[str], list[str]]:
    """Errors and warnings for the extra NAME=value lines."""
    errors: list[str] = []
    warnings: list[str] = []
    seen: set[str] = set()
    for number, name, _value, has_eq in _extra_env_lines(text):
        where = f"line {number}"
        if not _ENV_NAME_RE.match(name):
            errors.append(f"{where}: '{name}' is not a valid variable name (write NAME=value)")
        elif not has_eq:
            errors.append(f"{where}: {name} has no value (write {name}=value)")
        elif name in INVENTED_VARIABLES:
            errors.append(f"{where}: {name} does not exist in Ollama: {INVENTED_VARIABLES[name]}")
        elif name in FORM_VARIABLES:
            errors.append(f"{where}: {name} is set by the form ({FORM_VARIABLES[name]}); set it there")
        elif name.startswith("OLLAMA_") and name not in OTHER_SERVER_VARIABLES:
            warnings.append(f"{where}: {name} is not a variable Ollama is known to read; check the spelling")
        if name in seen:
            warnings.append(f"{where}: {name} is set twice; the last line wins")
        seen.add(name)
    return errors, warnings


def _valid_host(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return bool(_HOSTNAME_RE.match(host))


def validate(s: ServerSettings) -> Validation:
    """Check every field; reasons are full sentences a user can act on."""
    errors: dict[str, str] = {}
    warnings: dict[str, str] = {}

    if not 1 <= s.num_parallel <= 64:
        errors["num_parallel"] = "Parallel requests must be between 1 and 64."
    elif s.num_parallel > 8:
        warnings["num_parallel"] = (
            f"{s.num_parallel} parallel requests multiply the KV cache by {s.num_parallel}; "
            "check the VRAM price before applying."
        )

    if s.context_length is not None:
        if not 256 <= s.context_length <= 1_048_576:
            errors["context_length"] = "Context length must be between 256 and 1048576 tokens (or Default)."
        elif s.context_length % 256:
            warnings["context_length"] = "Ollama pads the KV cache to multiples of 256 tokens."

    if s.kv_cache_type not in KV_CACHE_TYPES:
        errors["kv_cache_type"] = f"KV-cache type must be one of {', '.join(KV_CACHE_TYPES)}."
    if s.flash_attention not in FLASH_ATTENTION_MODES:
        errors["flash_attention"] = f"Flash attention must be one of {', '.join(FLASH_ATTENTION_MODES)}."
    elif s.kv_cache_type in ("q8_0", "q4_0"):
        if s.flash_attention == "off":
            errors["kv_cache_type"] = (
                f"A {s.kv_cache_type} KV cache needs flash attention: set flash attention to On "
                "(with it Off, Ollama silently falls back to f16)."
            )
        elif s.flash_attention == "auto":
            warnings["kv_cache_type"] = (
                f"{s.kv_cache_type} applies only where flash attention ends up on; "
                "choose On to be sure."
            )

    keep_alive_s = parse_keep_alive(s.keep_alive)
    if keep_alive_s is None:
        errors["keep_alive"] = "Keep-alive must be a duration like 5m, 1h or 30s, seconds, or -1 for forever."
    elif keep_alive_s == 0:
        warnings["keep_alive"] = (
            "0 unloads the model after every request, so each request pays the load time."
        )

    if not 0 <= s.max_loaded_models <= 64:
        errors["max_loaded_models"] = "Max loaded models must be between 0 (Ollama decides) and 64."
    if not 1 <= s.max_queue <= 1_000_000:
        errors["max_queue"] = "Max queue must be between 1 and 1000000 requests."
    if not 0 <= s.gpu_overhead_mib <= 1_048_576:
        errors["gpu_overhead_mib"] = "GPU overhead must be between 0 and 1048576 MiB."
    elif s.gpu_overhead_mib > 1024:
        warnings["gpu_overhead_mib"] = (
            "An overhead above ~1 GiB can drop a 24 GB card below Ollama's 23 GiB tier, "
            "so the default context falls from 32768 to 4096."
        )

    host_problem = _host_problem(s.host)
    if host_problem:
        errors["host"] = host_problem
    elif s.exposed_to_network and not s.allow_network:
        errors["host"] = (
            f"Binding to {s.host} would expose the server to the network, and Ollama's API has no "
            "authentication. Tick “Allow network access” to confirm, or use 127.0.0.1."
        )
    elif s.exposed_to_network:
        warnings["host"] = (
            f"Binding to {s.host} exposes the server to the network, and Ollama's API has no "
            "authentication: anyone who can reach this port can use and delete your models."
        )
    if not 1 <= s.port <= 65535:
        errors["port"] = "Port must be between 1 and 65535."
    elif s.port < 1024:
        warnings["port"] = "Ports below 1024 need administrator rights on most systems."

    if s.models_dir.strip().startswith("~"):
        errors["models_dir"] = (
            "Ollama does not expand ~ in OLLAMA_MODELS; write the folder's full path."
        )
    elif s.models_dir and not (s.models_dir.startswith("/") or _is_windows_absolute(s.models_dir)):
        warnings["models_dir"] = (
            "A relative models directory is resolved from wherever the server starts; "
            "use a full path."
        )

    extra_errors, extra_warnings = _check_extra_env(s.extra_env)
    if extra_errors:
        errors["extra_env"] = "; ".join(extra_errors) + "."
    if extra_warnings:
        warnings["extra_env"] = "; ".join(extra_warnings) + "."
    return Validation(errors, warnings)
