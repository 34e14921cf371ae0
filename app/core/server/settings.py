"""Server settings in a vocabulary every inference server shares: parallel slots, context per
slot, KV-cache type, flash attention, batch sizes, keep-alive, queue and address.

What a setting becomes for a given server (environment variables for one, command-line flags for
another) is that backend's mapping (see app.core.server.mapping); knobs only one server has live in
`options`, which that backend defines, reads and validates.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from app.core.saved_format import SavedFormat
from app.core.server.exposure import LOOPBACK_NAMES, assess, is_loopback, same_host

# The settings file's format version (app.adapters.storage.settings_store reads older ones).
SETTINGS_VERSION = 2

KV_CACHE_TYPES = ("f16", "q8_0", "q4_0")
FLASH_ATTENTION_MODES = ("auto", "on", "off")

# What each field is called in the form, for messages a user reads.
FIELD_LABELS: dict[str, str] = {
    "num_parallel": "Parallel requests",
    "context_length": "Context length",
    "kv_cache_type": "KV-cache type",
    "flash_attention": "Flash attention",
    "batch_size": "Batch",
    "micro_batch_size": "Micro-batch",
    "keep_alive": "Keep-alive",
    "max_queue": "Max queue",
    "host": "Host",
    "port": "Port",
    "network_allowed_for": "Allow network access",
    "extra_settings": "Extra settings",
    "backend": "Server",
    "options": "Server options",
}

LEGACY_FIELD_NAMES = {"extra_env": "extra_settings"}
# Formats up to 2 kept the permission to bind beyond loopback as a yes/no, tied to no host.
LEGACY_PERMISSION_FIELD = "allow_network"
_LEGACY_LABELS = {LEGACY_PERMISSION_FIELD: "Allow network access"}

_DURATION_RE = re.compile(r"^-?(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$")
_HOSTNAME_RE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$")

LOOPBACK_HOSTS = ("127.0.0.1", *LOOPBACK_NAMES, "::1")  # examples; is_loopback() also knows 127.0.0.0/8
MAX_BATCH = 65_536  # tokens; far above what any GPU processes in one step
MAX_PARALLEL = 64  # slots; each gets the full context
MIN_CONTEXT, MAX_CONTEXT = 256, 1_048_576  # tokens

OptionValue = str | int | float | bool


@dataclass(frozen=True)
class ServerSettings:
    """Everything a server reads at start, as the form edits it. None means the server decides."""

    num_parallel: int = 1  # slots served at once ("batch size" in the articles)
    context_length: int | None = None  # tokens per slot
    kv_cache_type: str = "f16"
    flash_attention: str = "auto"
    batch_size: int | None = None  # tokens per prompt-processing step (logical batch)
    micro_batch_size: int | None = None  # tokens per physical step on the GPU
    keep_alive: str = "5m"
    max_queue: int = 512
    host: str = "127.0.0.1"
    port: int = 11434
    # Opening the server to others must be confirmed (these servers' APIs have no authentication), and
    # the confirmation names the host it was given for: another host must be confirmed again.
    network_allowed_for: str = ""
    extra_settings: str = ""  # backend-specific free text (NAME=value lines, extra flags)
    # The server kind these are for (its mapping's kind); the composition root picks the app's default one,
    # and the reader of saved documents knows whose those that name none are (SavedFormat.default_backend).
    backend: str = ""
    # The backend's own knobs as (name, value), sorted; a missing name means the backend's default.
    options: tuple[tuple[str, OptionValue], ...] = ()

    def __post_init__(self) -> None:
        # One order (by name) for any way the options were given, so equal settings compare equal.
        pairs = _option_pairs(dict(self.options))
        if pairs != self.options:
            object.__setattr__(self, "options", pairs)
        # A permission given for another host is no permission: replace(host=...) drops it.
        if self.network_allowed_for and not same_host(self.network_allowed_for, self.host):
            object.__setattr__(self, "network_allowed_for", "")

    def replace(self, **changes: Any) -> ServerSettings:
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)

    def option(self, name: str, default: Any = None) -> Any:
        """One backend option's saved value, or default when it is not set."""
        return dict(self.options).get(name, default)

    def with_options(self, **values: OptionValue | None) -> ServerSettings:
        """A copy with backend options set (None removes one, giving the backend's default)."""
        merged: dict[str, OptionValue] = dict(self.options)
        for name, value in values.items():
            if value is None:
                merged.pop(name, None)
            else:
                merged[name] = value
        return dataclasses.replace(self, options=_option_pairs(merged))

    @property
    def gpu_overhead_mib(self) -> int:
        """VRAM (MiB) the server keeps free per GPU, for the memory estimate; 0 where the backend has none."""
        value = self.option("gpu_overhead_mib", 0)
        return value if _is_int(value) and value > 0 else 0

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
        """host:port as a server is told to listen (IPv6 in brackets)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    @property
    def exposed_to_network(self) -> bool:
        """True when the server would listen beyond this machine (the API has no authentication)."""
        return not is_loopback(self.host)

    @property
    def allow_network(self) -> bool:
        """True when the user allowed others to reach the server on this very host."""
        return bool(self.network_allowed_for)

    def allowing_network(self, allowed: bool = True) -> ServerSettings:
        """A copy with access by others allowed (for the current host) or not."""
        return dataclasses.replace(self, network_allowed_for=self.host if allowed else "")

    def to_json(self) -> dict[str, Any]:
        """A plain dict of the fields (options as an object), for files and run documents."""
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "options"}
        data["options"] = dict(self.options)
        return data

    @classmethod
    def from_json(cls, data: Any, saved: SavedFormat | None = None) -> tuple[ServerSettings, list[str]]:
        """Build from a dict; unknown keys and wrongly typed values are dropped and reported.

        With `saved` (the names of earlier formats) also reads format 1's flat dicts (still inside older run
        documents): a dict naming no backend is the saved format's default one, its backend-only knobs
        (saved.option_fields) become options and `extra_env` becomes `extra_settings`.
        """
        saved = saved or SavedFormat()
        defaults = cls(backend=saved.default_backend)
        if not isinstance(data, dict):
            return defaults, [f"The settings are not a JSON object ({type(data).__name__}); using defaults."]
        data = dict(data)
        for old, new in LEGACY_FIELD_NAMES.items():
            if old in data and new not in data:
                data[new] = data.pop(old)
        permission_problems = _migrate_permission(data)
        problems: list[str] = []
        kwargs: dict[str, Any] = {"backend": defaults.backend}
        options, option_problems = _options_from(data.get("options", {}))
        legacy = {name: data[name] for name in saved.option_fields if name in data}
        for name, value in legacy.items():
            if isinstance(value, OptionValue):
                options.setdefault(name, value)
        problems += option_problems
        for f in fields(cls):
            if f.name == "network_allowed_for":
                problems += permission_problems  # reported where the old field stood
            if f.name not in data or f.name == "options":
                continue
            value = data[f.name]
            default = getattr(defaults, f.name)
            if f.name in ("context_length", "batch_size", "micro_batch_size"):
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
        known = {f.name for f in fields(cls)} | set(saved.option_fields) | {LEGACY_PERMISSION_FIELD}
        for key in sorted(set(data) - known):
            problems.append(f"'{key}': not a setting this version knows; ignored.")
        return cls(**kwargs, options=_option_pairs(options)), problems


def _migrate_permission(data: dict[str, Any]) -> list[str]:
    """Turn an old `allow_network: true` into a permission for the host saved beside it (in place).

    It was given for that host, so it is kept for it when that host is exposed; on a loopback
    host it allowed nothing and is dropped. A file that has the new field keeps only that.
    """
    if LEGACY_PERMISSION_FIELD not in data:
        return []
    value = data.pop(LEGACY_PERMISSION_FIELD)
    if "network_allowed_for" in data:
        return []
    if not isinstance(value, bool):
        return [f"{_label(LEGACY_PERMISSION_FIELD)}: {_short_repr(value)} is not true or false; "
                "using the default False."]
    host = data.get("host", ServerSettings.host)
    if value and isinstance(host, str) and not is_loopback(host):
        data["network_allowed_for"] = host
    return []


def _option_pairs(values: Mapping[str, OptionValue]) -> tuple[tuple[str, OptionValue], ...]:
    return tuple(sorted(values.items()))


def _options_from(data: Any) -> tuple[dict[str, OptionValue], list[str]]:
    """Options from a JSON object: names to text, numbers or true/false; anything else is reported."""
    if not isinstance(data, dict):
        return {}, [f"{_label('options')}: {_short_repr(data)} is not an object; using the server's defaults."]
    options: dict[str, OptionValue] = {}
    problems = []
    for name, value in data.items():
        if isinstance(value, OptionValue):
            options[str(name)] = value
        else:
            problems.append(f"{_label('options')}: '{name}' = {_short_repr(value)} is not text, a number or "
                            "true/false; using the server's default.")
    return options, problems


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _label(name: str) -> str:
    return f"{FIELD_LABELS.get(name) or _LEGACY_LABELS.get(name, name)} ({name})"


def _short_repr(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True)
class Validation:
    """Per-field problems: errors block Apply, warnings are shown but allowed."""

    errors: dict[str, str] = field(default_factory=dict)
    warnings: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.errors

    def merged(self, other: Validation) -> Validation:
        """Both sets of problems; for a field in both, this one's message comes first."""
        return Validation(_merge(self.errors, other.errors), _merge(self.warnings, other.warnings))


def _merge(first: Mapping[str, str], second: Mapping[str, str]) -> dict[str, str]:
    merged = dict(first)
    for name, text in second.items():
        merged[name] = f"{merged[name]} {text}" if name in merged else text
    return merged


def parse_keep_alive(text: str) -> float | None:
    """Seconds for a keep-alive value ('5m', '1h30m', '300', '-1'); None if unparsable. Negative = forever."""
    t = text.strip()
    if re.fullmatch(r"-?\d{1,18}", t):  # longer digit runs are no duration (and int() refuses 4300+)
        return float(int(t))
    if not _DURATION_RE.match(t):
        return None
    sign = -1.0 if t.startswith("-") else 1.0
    units = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
    total = 0.0
    for number, _, unit in re.findall(r"(\d+(\.\d+)?)(ns|us|µs|ms|s|m|h)", t):
        total += float(number) * units[unit]
    return sign * total


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


def _valid_host(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return bool(_HOSTNAME_RE.match(host))


def validate(s: ServerSettings) -> Validation:
    """Check every shared field; reasons are full sentences a user can act on. A backend's
    mapping adds the checks of its own options and extra settings."""
    errors: dict[str, str] = {}
    warnings: dict[str, str] = {}

    if not 1 <= s.num_parallel <= MAX_PARALLEL:
        errors["num_parallel"] = f"Parallel requests must be between 1 and {MAX_PARALLEL}."
    elif s.num_parallel > 8:
        warnings["num_parallel"] = (
            f"{s.num_parallel} parallel requests multiply the KV cache by {s.num_parallel}; "
            "check the VRAM price before applying."
        )

    if s.context_length is not None:
        if not MIN_CONTEXT <= s.context_length <= MAX_CONTEXT:
            errors["context_length"] = f"Context length must be between {MIN_CONTEXT} and {MAX_CONTEXT} tokens (or Default)."
        elif s.context_length % 256:
            warnings["context_length"] = "The KV cache is padded to multiples of 256 tokens."

    if s.kv_cache_type not in KV_CACHE_TYPES:
        errors["kv_cache_type"] = f"KV-cache type must be one of {', '.join(KV_CACHE_TYPES)}."
    if s.flash_attention not in FLASH_ATTENTION_MODES:
        errors["flash_attention"] = f"Flash attention must be one of {', '.join(FLASH_ATTENTION_MODES)}."
    elif s.kv_cache_type in ("q8_0", "q4_0"):
        if s.flash_attention == "off":
            errors["kv_cache_type"] = (
                f"A {s.kv_cache_type} KV cache needs flash attention: set flash attention to On "
                "(with it Off, the server falls back to f16 or refuses to start)."
            )
        elif s.flash_attention == "auto":
            warnings["kv_cache_type"] = (
                f"{s.kv_cache_type} applies only where flash attention ends up on; "
                "choose On to be sure."
            )

    for name, label in (("batch_size", "Batch"), ("micro_batch_size", "Micro-batch")):
        value = getattr(s, name)
        if value is not None and not 1 <= value <= MAX_BATCH:
            errors[name] = f"{label} must be between 1 and {MAX_BATCH} tokens (or Default)."
    if (s.batch_size is not None and s.micro_batch_size is not None and "batch_size" not in errors
            and "micro_batch_size" not in errors and s.micro_batch_size > s.batch_size):
        errors["micro_batch_size"] = (
            f"The micro-batch ({s.micro_batch_size}) cannot be larger than the batch ({s.batch_size})."
        )

    keep_alive_s = parse_keep_alive(s.keep_alive)
    if keep_alive_s is None:
        errors["keep_alive"] = "Keep-alive must be a duration like 5m, 1h or 30s, seconds, or -1 for forever."
    elif keep_alive_s == 0:
        warnings["keep_alive"] = (
            "0 unloads the model after every request, so each request pays the load time."
        )

    if not 1 <= s.max_queue <= 1_000_000:
        errors["max_queue"] = "Max queue must be between 1 and 1000000 requests."

    host_problem = _host_problem(s.host)
    bind = assess(s.host, s.port, s.network_allowed_for)  # the bind address alone; a backend adds its own
    if host_problem:
        errors["host"] = host_problem
    elif not bind.allowed:
        errors["host"] = (
            f"Binding to {s.host} would expose the server to the network, and its API has no "
            f"authentication. Tick “Allow network access on {s.host}” to confirm, or use 127.0.0.1."
        )
    elif bind.exposed:
        warnings["host"] = (
            f"Binding to {s.host} exposes the server to the network, and its API has no "
            "authentication: anyone who can reach this port can use and delete your models."
        )
    if not 1 <= s.port <= 65535:
        errors["port"] = "Port must be between 1 and 65535."
    elif s.port < 1024:
        warnings["port"] = "Ports below 1024 need administrator rights on most systems."
    return Validation(errors, warnings)


__all__ = ["FIELD_LABELS", "FLASH_ATTENTION_MODES", "KV_CACHE_TYPES",
           "LEGACY_PERMISSION_FIELD", "LOOPBACK_HOSTS", "MAX_BATCH", "SETTINGS_VERSION", "ServerSettings", "Validation",
           "parse_keep_alive", "validate"]
