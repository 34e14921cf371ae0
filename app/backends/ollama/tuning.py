"""The shared settings as `ollama serve` reads them: OLLAMA_* environment variables.

Defaults are left unset so Ollama decides; the knobs only Ollama has (max loaded models, GPU
overhead, models folder, the program's path) are its options; the extra settings are extra
environment lines, checked against the variables articles invented.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from app.backends.ollama.launch_plan import ollama_default_context_length
from app.core.server.exposure import exposure_of
from app.core.server.mapping import (COUNT, DIRECTORY, MEBIBYTES, PROGRAM, MappingTexts, OptionSpec, ServerDefaults,
                                 field_or_option_label)
from app.core.server.settings import ServerSettings, Validation, validate
from app.core.units import MIB

KIND = "ollama"

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

# The environment variable behind each shared field and option (those without one are app preferences).
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

# The shared fields Ollama cannot be given at start, with what to do instead.
UNSUPPORTED: dict[str, str] = {
    "batch_size": (
        "Ollama has no server setting for the prompt batch: num_batch is a per-model option. "
        "Create a tuned variant with its own num_batch on the Models page."
    ),
    "micro_batch_size": "Ollama has no setting for the micro-batch; it follows the model's num_batch.",
}

OPTIONS: tuple[OptionSpec, ...] = (
    OptionSpec("max_loaded_models", "Max loaded models", COUNT, 0, "0 = Ollama decides (3 per GPU).",
               "OLLAMA_MAX_LOADED_MODELS", low=0, high=64, group="memory"),
    OptionSpec("gpu_overhead_mib", "GPU overhead", MEBIBYTES, 0,
               "VRAM Ollama leaves free on each GPU. Above ~1 GiB a 24 GB card falls to the 4096 default "
               "context.", "OLLAMA_GPU_OVERHEAD", low=0, high=1_048_576, step=256, group="memory"),
    OptionSpec("models_dir", "Models directory", DIRECTORY, "", "Empty = Ollama's default, ~/.ollama/models.",
               "OLLAMA_MODELS", placeholder="Ollama's default (~/.ollama/models)"),
    OptionSpec("ollama_binary", "ollama binary", PROGRAM, "", "Empty = the first ollama on PATH.",
               placeholder="Search PATH for ollama"),
)

TEXTS = MappingTexts(
    server_name="Ollama",
    context_default="Default (Ollama picks by VRAM)",
    context_hint=("Tokens per request slot, e.g. 8192 or 32k. Default: 4096 below 23 GiB of VRAM, "
                  "32768 from 23 GiB (an RTX 4090)."),
    flash_auto="Auto — Ollama decides",
    extra_label="Extra environment",
    extra_hint="NAME=value per line for what the form does not cover; # starts a comment.",
    extra_placeholder="OLLAMA_LOAD_TIMEOUT=10m\nCUDA_VISIBLE_DEVICES=0",
    mapping_title="Environment for ollama serve",
    defaults_note="# every other variable: Ollama's default",
)

_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# Origins a browser page can have; a wildcard host there lets any web site call the API from the
# user's browser (Ollama answers such a page's requests, CORS included), even on 127.0.0.1.
_WEB_SCHEMES = ("", "http", "https", "ws", "wss")


def _spec(name: str) -> OptionSpec:
    return next(spec for spec in OPTIONS if spec.name == name)


def max_loaded_models(settings: ServerSettings) -> int:
    """OLLAMA_MAX_LOADED_MODELS as set (0 = Ollama decides)."""
    return int(_spec("max_loaded_models").value_in(settings))


def gpu_overhead_mib(settings: ServerSettings) -> int:
    """OLLAMA_GPU_OVERHEAD as set, in MiB."""
    return int(_spec("gpu_overhead_mib").value_in(settings))


def models_dir(settings: ServerSettings) -> str:
    """OLLAMA_MODELS as set ('' = Ollama's default)."""
    return str(_spec("models_dir").value_in(settings))


def binary(settings: ServerSettings) -> str:
    """The `ollama` program the user chose ('' = search PATH)."""
    return str(_spec("ollama_binary").value_in(settings))


def extra_env_pairs(settings: ServerSettings) -> list[tuple[str, str]]:
    """The extra environment lines as (name, value), skipping blanks and comments."""
    return [(name, value) for _, name, value, _ in _extra_env_lines(settings.extra_settings)]


def environment(settings: ServerSettings) -> dict[str, str]:
    """The OLLAMA_* environment for `ollama serve`; defaults are left unset so Ollama decides."""
    env: dict[str, str] = {"OLLAMA_HOST": settings.bind_address}
    env["OLLAMA_NUM_PARALLEL"] = str(settings.num_parallel)
    if settings.context_length is not None:
        env["OLLAMA_CONTEXT_LENGTH"] = str(settings.context_length)
    if settings.kv_cache_type != "f16":
        env["OLLAMA_KV_CACHE_TYPE"] = settings.kv_cache_type
    if settings.flash_attention != "auto":
        env["OLLAMA_FLASH_ATTENTION"] = "1" if settings.flash_attention == "on" else "0"
    if settings.keep_alive != "5m":
        env["OLLAMA_KEEP_ALIVE"] = settings.keep_alive
    if max_loaded_models(settings):
        env["OLLAMA_MAX_LOADED_MODELS"] = str(max_loaded_models(settings))
    if settings.max_queue != 512:
        env["OLLAMA_MAX_QUEUE"] = str(settings.max_queue)
    if gpu_overhead_mib(settings):
        env["OLLAMA_GPU_OVERHEAD"] = str(gpu_overhead_mib(settings) * MIB)  # Ollama reads bytes
    if models_dir(settings):
        env["OLLAMA_MODELS"] = models_dir(settings)
    for name, value in extra_env_pairs(settings):
        # A line for a variable the form owns (validation refuses it) must not replace the form's
        # value: an OLLAMA_HOST there would move the bind address past the exposure check.
        if name not in FORM_VARIABLES:
            env[name] = value
    return env


def open_origins(settings: ServerSettings) -> list[str]:
    """The OLLAMA_ORIGINS entries in the extra environment that let any web site in (e.g. *, http://*)."""
    found = []
    for name, value in extra_env_pairs(settings):
        if name != "OLLAMA_ORIGINS":
            continue
        for entry in (e.strip() for e in value.split(",")):
            scheme, sep, rest = entry.partition("://")
            if not sep:
                scheme, rest = "", entry
            if rest.startswith("*") and scheme.lower() in _WEB_SCHEMES:
                found.append(entry)
    return found


def exposures(settings: ServerSettings) -> tuple[str, ...]:
    """Who the extra environment lets call the server besides this machine's programs."""
    origins = open_origins(settings)
    if not origins:
        return ()
    return (f"any web page you open in a browser (OLLAMA_ORIGINS={','.join(origins)})",)


def mapping_text(settings: ServerSettings) -> list[str]:
    """The environment as the lines a user reads and copies, e.g. OLLAMA_NUM_PARALLEL=4."""
    return [f"{name}={value}" for name, value in environment(settings).items()]


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


def _is_windows_absolute(path: str) -> bool:
    return bool(re.match(r"^([A-Za-z]:[\\/]|\\\\)", path))


def _option_types(settings: ServerSettings) -> dict[str, str]:
    """Errors for saved options of the wrong type (the form cannot produce them; a hand-edited file can)."""
    errors = {}
    for spec in OPTIONS:
        value = settings.option(spec.name, spec.default)
        if isinstance(value, bool) or type(value) is not type(spec.default):
            wanted = "a whole number" if isinstance(spec.default, int) else "text"
            errors[spec.name] = f"{spec.label} must be {wanted}."
    return errors


def validate_ollama(settings: ServerSettings) -> Validation:
    """Ollama's own checks: its options, the extra environment and the settings it cannot take."""
    errors: dict[str, str] = _option_types(settings)
    warnings: dict[str, str] = {}
    for name, reason in UNSUPPORTED.items():
        if getattr(settings, name) is not None:
            errors[name] = reason
    loaded, overhead, folder = max_loaded_models(settings), gpu_overhead_mib(settings), models_dir(settings)
    if "max_loaded_models" not in errors and not 0 <= loaded <= 64:
        errors["max_loaded_models"] = "Max loaded models must be between 0 (Ollama decides) and 64."
    if "gpu_overhead_mib" in errors:
        pass
    elif not 0 <= overhead <= 1_048_576:
        errors["gpu_overhead_mib"] = "GPU overhead must be between 0 and 1048576 MiB."
    elif overhead > 1024:
        warnings["gpu_overhead_mib"] = (
            "An overhead above ~1 GiB can drop a 24 GB card below Ollama's 23 GiB tier, "
            "so the default context falls from 32768 to 4096."
        )
    if "models_dir" in errors:
        pass
    elif folder.strip().startswith("~"):
        errors["models_dir"] = "Ollama does not expand ~ in OLLAMA_MODELS; write the folder's full path."
    elif folder and not (folder.startswith("/") or _is_windows_absolute(folder)):
        warnings["models_dir"] = (
            "A relative models directory is resolved from wherever the server starts; use a full path."
        )
    extra_errors, extra_warnings = _check_extra_env(settings.extra_settings)
    exposure = exposure_of(settings, OLLAMA_TUNING)
    if exposure.others and not exposure.allowed:
        errors["network_allowed_for"] = (
            f"OLLAMA_ORIGINS={','.join(open_origins(settings))} lets any web page you open call the server "
            f"from your browser, and its API has no authentication. Tick “Allow network access on "
            f"{settings.host}” to confirm, or remove that origin from the extra environment."
        )
    elif exposure.others:
        extra_warnings.append(
            f"OLLAMA_ORIGINS={','.join(open_origins(settings))} lets any web page you open use the server "
            "and delete your models")
    if extra_errors:
        errors["extra_settings"] = "; ".join(extra_errors) + "."
    if extra_warnings:
        warnings["extra_settings"] = "; ".join(extra_warnings) + "."
    return Validation(errors, warnings)


# `ollama serve`'s own tuning when no OLLAMA_* variable sets it (the versions' changes: docs/ollama facts).
SERVER_DEFAULTS = ServerDefaults(
    num_parallel=1, context_length=None, kv_cache_type="f16", flash_attention="auto",
    words=("OLLAMA_NUM_PARALLEL 1 (Ollama's default since 0.10.0)",
           "OLLAMA_CONTEXT_LENGTH unset: Ollama's default context (4096 tokens; from 0.15.5 32768 with 23 GiB of "
           "VRAM or more, 262144 from 47 GiB)",
           "OLLAMA_KV_CACHE_TYPE f16", "OLLAMA_FLASH_ATTENTION unset: Ollama decides per model"))


class OllamaTuning:
    """The TuningMapping of `ollama serve` (see app.core.server.mapping)."""

    kind = KIND
    delivery = "environment"  # OLLAMA_* variables are read when `ollama serve` starts
    texts = TEXTS
    options = OPTIONS
    server_defaults = SERVER_DEFAULTS

    def setting_name(self, field: str) -> str:
        """The OLLAMA_* variable behind a field or option ('' for app preferences)."""
        return FIELD_ENV_VARIABLES.get(field, "")

    def unsupported(self) -> Mapping[str, str]:
        """The batch sizes: Ollama has no environment variable for them."""
        return UNSUPPORTED

    def validate(self, settings: ServerSettings) -> Validation:
        """The shared checks, then Ollama's own."""
        return validate(settings).merged(validate_ollama(settings))

    def mapping_text(self, settings: ServerSettings) -> list[str]:
        """The environment lines, e.g. OLLAMA_NUM_PARALLEL=4."""
        return mapping_text(settings)

    def label(self, name: str) -> str:
        """The form's label of a field or option."""
        return field_or_option_label(OPTIONS, TEXTS, name)

    def exposures(self, settings: ServerSettings) -> tuple[str, ...]:
        """A wildcard OLLAMA_ORIGINS in the extra environment (see exposures())."""
        return exposures(settings)

    def default_context_length(self, version: str | None, gpu_total_bytes: int | None,
                               gpu_overhead_bytes: int = 0) -> int | None:
        """Ollama's num_ctx by version and VRAM (4096, 32768 from 23 GiB, 262144 from 47 GiB; see launch_plan)."""
        return ollama_default_context_length(version, gpu_total_bytes, gpu_overhead_bytes)


OLLAMA_TUNING = OllamaTuning()


def ollama_settings(settings: ServerSettings | None = None, **options: int | str) -> ServerSettings:
    """settings (default: the defaults) for Ollama, with its options set, e.g. gpu_overhead_mib=512."""
    unknown = set(options) - {spec.name for spec in OPTIONS}
    if unknown:
        raise TypeError(f"not an Ollama option: {', '.join(sorted(unknown))}")
    return (settings or ServerSettings()).replace(backend=KIND).with_options(**options)


__all__ = ["FIELD_ENV_VARIABLES", "FORM_VARIABLES", "INVENTED_VARIABLES", "KIND", "OLLAMA_TUNING", "OPTIONS",
           "OTHER_SERVER_VARIABLES", "OllamaTuning", "UNSUPPORTED", "binary", "environment", "exposures",
           "extra_env_pairs", "gpu_overhead_mib", "mapping_text", "max_loaded_models", "models_dir",
           "ollama_settings", "open_origins", "validate_ollama"]
