"""The shared settings as llama-server takes them: command-line flags.

llama-server serves one GGUF file. Its `-c` is the TOTAL context, split evenly between the `-np`
slots, while the app's context setting is per slot: the command line gets context × parallel.
`--metrics` and `--slots` are always on (the dashboard and the Server page read them), and
`--cors-origins localhost` lets only pages served from this machine call it from a browser
(llama-server's default echoes any page's Origin). Extra settings are extra flags, read as
llama-server reads its command line with the options of the installed build's --help
(help_flags.py): a flag the form owns, or one that would move or open the API, is refused
wherever it stands, and a --cors-origins that lets other sites in needs the network permission.
"""

from __future__ import annotations

import difflib
import functools
import os
import shlex
from collections.abc import Mapping
from pathlib import Path

from app.backends.llama_server import engine, help_flags
from app.core.server.exposure import exposure_of, is_loopback
from app.core.server.mapping import (COUNT, DIRECTORY, MODEL_FILE, PROGRAM, MappingTexts, OptionSpec, ServerDefaults,
                                 field_or_option_label)
from app.core.server.settings import ServerSettings, Validation, validate

KIND = "llama_server"
GGUF_MAGIC = b"GGUF"

# The flag behind each shared field and option (those without one are app preferences).
FIELD_FLAGS: dict[str, str] = {
    "num_parallel": "-np",
    "context_length": "-c",
    "kv_cache_type": "-ctk/-ctv",
    "flash_attention": "-fa",
    "batch_size": "-b",
    "micro_batch_size": "-ub",
    "host": "--host",
    "port": "--port",
    "model_path": "-m",
    "n_gpu_layers": "-ngl",
    "threads": "-t",
}

# Flags the form sets; an extra line may not set them behind its back (each with the form's name).
FORM_FLAGS: dict[str, str] = {
    "-np": "parallel requests", "-c": "context length", "-ctk": "KV-cache type", "-ctv": "KV-cache type",
    "-fa": "flash attention", "-b": "batch", "-ub": "micro-batch", "-ngl": "GPU layers",
    "--metrics": "always on: the dashboard reads /metrics", "--slots": "always on: the Server page reads /slots",
    "--host": "host and port", "--port": "host and port", "-m": "model file", "-t": "threads",
    # Choosing another model source would leave the -m the form sets without effect.
    "-hf": "model file", "-mu": "model file", "--models-dir": "model file",
}

# Flags ollama-deck does not pass on, with why: its own clients could no longer reach the server, or the
# server would open more than its API to whoever reaches it.
REFUSED_FLAGS: dict[str, str] = {
    "--api-key": "ollama-deck's own requests send no API key, so the dashboard, prompts and benchmarks would "
                 "be refused",
    "--api-key-file": "ollama-deck's own requests send no API key, so the dashboard, prompts and benchmarks "
                      "would be refused",
    "--api-prefix": "ollama-deck calls the API at the server's root",
    "--ssl-key-file": "ollama-deck talks to the server over plain HTTP on this machine",
    "--ssl-cert-file": "ollama-deck talks to the server over plain HTTP on this machine",
    "--path": "it serves the files of a folder to whoever can reach the server",
}

# Web pages the server answers (its CORS): ollama-deck starts it for local pages only; an extra
# --cors-origins line replaces that, and one that lets other sites in needs the network permission.
CORS_FLAG = "--cors-origins"
VERBOSITY_FLAG = "--log-verbosity"
LOG_VERBOSITY = "4"  # llama.cpp's debug level: what prints the buffer sizes and the layers offloaded (as Ollama runs it)
LOCAL_ORIGINS = "localhost"  # llama-server's own word: reflect an Origin whose host is localhost, 127.0.0.1 or ::1

# The shared fields llama-server cannot be given, with what to do instead.
UNSUPPORTED: dict[str, str] = {
    "keep_alive": ("llama-server keeps its one model loaded while it runs; it has no keep-alive. "
                   "Its nearest flag, --sleep-idle-seconds N, can go in the extra flags."),
    "max_queue": ("llama-server has no queue limit: requests beyond the slots wait until one is free "
                  "(its /metrics counts them as deferred)."),
}
_DEFAULTS = ServerSettings()

OPTIONS: tuple[OptionSpec, ...] = (
    OptionSpec("model_path", "Model file", MODEL_FILE, "", "The GGUF file llama-server serves.", "-m",
               placeholder="Choose a .gguf file", group="memory"),
    OptionSpec("n_gpu_layers", "GPU layers", COUNT, -1, "Layers kept in VRAM; -1 = all. A CPU-only build ignores it.",
               "-ngl", low=-1, high=999, group="memory"),
    OptionSpec("threads", "Threads", COUNT, 0, "CPU threads for generation; 0 = llama-server decides.", "-t",
               low=0, high=1024, group="memory"),
    OptionSpec("models_dir", "Models folder", DIRECTORY, "", "A folder of GGUF files to choose from.",
               placeholder="No folder"),
    OptionSpec("binary", "llama-server program", PROGRAM, "",
               "Empty = the bundled llama-server; choose your own build (e.g. with CUDA) here.",
               placeholder="The bundled llama-server"),
)

TEXTS = MappingTexts(
    server_name="llama-server",
    context_default="Default (the model's own)",
    context_hint=("Tokens per request slot, e.g. 8192 or 32k. llama-server's -c is the total for all slots, "
                  "so it gets this × parallel. Default: the model's training context in each slot (llama-server's --fit "
                  "cuts it where the GPU cannot hold it, to 4096 a slot at least)."),
    flash_auto="Auto — llama-server decides",
    extra_label="Extra flags",
    extra_hint=("llama-server flags the form does not cover, e.g. --no-warmup, written as on a shell's command "
                "line (one or more per line, quotes work); # starts a comment."),
    extra_placeholder="--cache-reuse 256\n--sleep-idle-seconds 300",
    mapping_title="Command line of llama-server",
    defaults_note="# every other flag: llama-server's default",
)

MODEL_MISSING = "Choose a GGUF model file to serve."

# llama-server's own tuning when given no flags: -np auto is 4 slots with a unified KV cache (one buffer the slots
# share), which an explicit -np turns off unless --kv-unified is given too; without -c its --fit sizes the cache for
# the model's training context in each slot (one unified cache: the training context in all), cut to fit the GPU.
SERVER_DEFAULTS = ServerDefaults(
    num_parallel=4, context_length=None, kv_cache_type="f16", flash_attention="auto", extra_lines=("--kv-unified",),
    words=("-np auto (llama-server's default): 4 slots sharing one unified KV cache (-kvu)",
           "-c unset: the model's training context, in one cache the 4 slots share (cut by --fit to fit the GPU)",
           "-ctk/-ctv f16", "-fa auto", "-b/-ub: llama-server's own"))


def _spec(name: str) -> OptionSpec:
    return next(spec for spec in OPTIONS if spec.name == name)


def model_path(settings: ServerSettings) -> str:
    """The GGUF file to serve ('' = none chosen)."""
    return str(_spec("model_path").value_in(settings)).strip()


def n_gpu_layers(settings: ServerSettings) -> int:
    """Layers to keep in VRAM (-1 = all)."""
    return int(_spec("n_gpu_layers").value_in(settings))


def threads(settings: ServerSettings) -> int:
    """CPU threads (0 = llama-server decides)."""
    return int(_spec("threads").value_in(settings))


def models_dir(settings: ServerSettings) -> str:
    """The folder of GGUF files to choose from ('' = none)."""
    return str(_spec("models_dir").value_in(settings)).strip()


def configured_binary(settings: ServerSettings) -> str:
    """The llama-server program the user chose ('' = the bundled one)."""
    return str(_spec("binary").value_in(settings)).strip()


@functools.cache
def _bundled_binary() -> str:
    found = engine.find_llama_server()  # imports a package once; the form asks on every edit
    return str(found) if found is not None else ""


def binary(settings: ServerSettings) -> str:
    """The program that will run: the chosen one, else the bundled one ('' when neither exists)."""
    return os.path.expanduser(configured_binary(settings)) or _bundled_binary()


def extra_flags(text: str) -> help_flags.ParsedFlags:
    """The extra-flag text as llama-server reads it: every option wherever it stands, with its values."""
    return help_flags.parse_flags(text)


ALIAS_FLAGS = ("-a", "--alias")
GGUF_SUFFIX = ".gguf"


def model_alias(path: str) -> str:
    """The name the server is given for its model: the file's name without .gguf."""
    name = os.path.basename(path)
    return name[: -len(GGUF_SUFFIX)] if name.lower().endswith(GGUF_SUFFIX) and len(name) > len(GGUF_SUFFIX) else name


def _passed_extra(settings: ServerSettings) -> list[help_flags.FlagUse]:
    """The extra options that reach the command line: complete ones the form does not own and ollama-deck
    does not refuse (validation says why the others are left out)."""
    refused = _owned_spellings() | _refused_spellings()
    return [use for use in extra_flags(settings.extra_settings).uses if use.complete and use.flag not in refused]


def arguments(settings: ServerSettings) -> list[str]:
    """The arguments after the program, defaults left out so llama-server decides."""
    args: list[str] = []
    extra = _passed_extra(settings)
    named = {use.flag for use in extra}
    if model_path(settings):
        path = os.path.expanduser(model_path(settings))
        args += ["-m", path]
        # Without an alias the server names its model by the whole path; the file's name reads better in
        # every list and title (a user's own --alias line wins).
        if not named & set(ALIAS_FLAGS):
            args += ["--alias", model_alias(path)]
    args += ["--host", settings.host, "--port", str(settings.port), "-np", str(settings.num_parallel)]
    if settings.context_length is not None:
        args += ["-c", str(settings.context_length * settings.num_parallel)]  # -c is shared by the slots
    if settings.kv_cache_type != "f16":
        args += ["-ctk", settings.kv_cache_type, "-ctv", settings.kv_cache_type]
    if settings.flash_attention != "auto":
        args += ["-fa", settings.flash_attention]
    if settings.batch_size is not None:
        args += ["-b", str(settings.batch_size)]
    if settings.micro_batch_size is not None:
        args += ["-ub", str(settings.micro_batch_size)]
    layers = n_gpu_layers(settings)
    args += ["-ngl", "all" if layers < 0 else str(layers)]
    if threads(settings):
        args += ["-t", str(threads(settings))]
    args += ["--metrics", "--slots"]
    if not named & set(help_flags.spellings(VERBOSITY_FLAG)):
        # llama.cpp's own account of a load (each buffer's size, the layers offloaded) is printed at its debug
        # verbosity only: the watchdog reads the layers placed and the runtime allowance is learnt from the buffers.
        args += [VERBOSITY_FLAG, LOG_VERBOSITY]
    if CORS_FLAG not in named:
        # llama-server's default (*, with credentials) echoes any page's Origin: every web site the user
        # opens could use it. Only pages served from this machine may.
        args += [CORS_FLAG, LOCAL_ORIGINS]
    for use in extra:
        args += use.words
    return args


def command(settings: ServerSettings) -> list[str]:
    """The full argv: the program, then arguments(settings)."""
    return [binary(settings) or "llama-server", *arguments(settings)]


def mapping_text(settings: ServerSettings) -> list[str]:
    """The command line as a shell would take it, one flag per line with backslash continuations."""
    argv = command(settings)
    lines = [shlex.quote(argv[0])]
    words = argv[1:]
    index = 0
    while index < len(words):
        word = words[index]
        count = help_flags.value_count(word)  # an option's values, whatever they look like (-ngl -1)
        values = words[index + 1:index + 1 + count]
        lines.append(" ".join(shlex.quote(part) for part in [word, *values]))
        index += 1 + len(values)
    continued = [line + " \\" for line in lines[:-1]] + lines[-1:]
    return continued if model_path(settings) else [f"# {MODEL_MISSING}", *continued]


@functools.cache
def _owned_spellings() -> frozenset[str]:
    return frozenset(name for flag in FORM_FLAGS for name in help_flags.spellings(flag))


@functools.cache
def _refused_spellings() -> frozenset[str]:
    return frozenset(name for flag in REFUSED_FLAGS for name in help_flags.spellings(flag))


def _form_name(flag: str) -> str:
    for owned in FORM_FLAGS:
        if flag in help_flags.spellings(owned):
            return FORM_FLAGS[owned]
    return ""


def _refusal_reason(flag: str) -> str:
    return next((reason for refused, reason in REFUSED_FLAGS.items() if flag in help_flags.spellings(refused)), "")


def _issue_text(issue: help_flags.FlagIssue, known: frozenset[str]) -> str:
    where = f"line {issue.line}"
    problem = issue.problem
    if problem is help_flags.FlagProblem.UNSPLITTABLE:
        return f"{where}: the line has an open quote (close it, or quote the value as a shell would)"
    if problem is help_flags.FlagProblem.NOT_A_FLAG:
        return f"{where}: '{issue.word}' is not a flag, nor the value of one (e.g. --cache-reuse 256)"
    if problem is help_flags.FlagProblem.MISSING_VALUE:
        count = help_flags.value_count(issue.flag)
        return f"{where}: {issue.flag} needs {'a value' if count == 1 else f'{count} values'} on its line"
    if problem is help_flags.FlagProblem.NO_VALUE_TAKEN:
        return f"{where}: {issue.flag} takes no value; write it alone"
    nearest = difflib.get_close_matches(issue.flag, sorted(known), n=1)
    hint = f"; did you mean {nearest[0]}?" if nearest else "; see llama-server --help"
    return f"{where}: {issue.flag} is not a llama-server flag{hint}"


def check_extra_flags(text: str) -> list[str]:
    """Errors for the extra flags, each option checked wherever it stands on its line: not a flag,
    unknown to llama-server (with the nearest real one), malformed, owned by the form (with the field
    to use), or refused by ollama-deck (with why)."""
    parsed = extra_flags(text)
    known = help_flags.known_flags()
    found: list[tuple[int, str]] = [(issue.line, _issue_text(issue, known)) for issue in parsed.issues
                                    if issue.problem is not help_flags.FlagProblem.MISSING_VALUE
                                    or issue.flag not in _owned_spellings() | _refused_spellings()]
    for use in parsed.uses:
        where = f"line {use.line}"
        if use.flag in _owned_spellings():
            found.append((use.line, f"{where}: {use.flag} is set by the form ({_form_name(use.flag)}); set it there"))
        elif use.flag in _refused_spellings():
            found.append((use.line, f"{where}: {use.flag} is not taken: {_refusal_reason(use.flag)}"))
    errors: list[str] = []
    for _line, message in sorted(found, key=lambda item: item[0]):
        if message not in errors:
            errors.append(message)
    return errors


def _is_local_origin(origin: str) -> bool:
    """True for an origin only this machine serves pages from (http://127.0.0.1:3000, http://localhost)."""
    scheme, separator, rest = origin.strip().partition("://")
    if not separator or not scheme:
        return False
    authority = rest.split("/", 1)[0]
    host = authority.rsplit("]", 1)[0] + "]" if authority.startswith("[") else authority.rsplit(":", 1)[0]
    return is_loopback(host) and "*" not in host


def open_origins(settings: ServerSettings) -> list[str]:
    """The --cors-origins values in the extra flags that let web pages from elsewhere call the server
    (e.g. *, or https://example.com); llama-server's own `localhost` and loopback origins are local."""
    found = []
    for use in extra_flags(settings.extra_settings).of([CORS_FLAG]):
        value = use.values[0] if use.values else ""
        entries = [entry.strip() for entry in value.split(",")]
        if value.strip() != LOCAL_ORIGINS and not all(_is_local_origin(entry) for entry in entries):
            found.append(value)
    return found


def exposures(settings: ServerSettings) -> tuple[str, ...]:
    """Who the extra flags let call the server besides this machine's programs."""
    origins = open_origins(settings)
    if not origins:
        return ()
    anyone = any("*" in origin or "null" in origin.lower() for origin in origins)
    who = "any web page you open in a browser" if anyone else "web pages from " + ", ".join(origins)
    return (f"{who} ({CORS_FLAG} {' '.join(shlex.quote(origin) for origin in origins)})",)


def model_file_problem(path_text: str) -> str:
    """Why the GGUF file cannot be served ('' when it exists and starts like a GGUF file)."""
    path = Path(os.path.expanduser(path_text))
    if not path.exists():
        return f"The model file {path} does not exist. Choose a GGUF model file to serve."
    if not path.is_file():
        return f"{path} is not a file. Choose a GGUF model file to serve."
    try:
        with path.open("rb") as handle:
            magic = handle.read(4)
    except OSError as exc:
        return f"The model file {path} cannot be read ({exc.strerror or exc}). Check its permissions."
    if magic != GGUF_MAGIC:
        return f"{path} is not a GGUF file (it does not start with 'GGUF'). Choose a .gguf model file."
    return ""


def _option_types(settings: ServerSettings) -> dict[str, str]:
    errors = {}
    for spec in OPTIONS:
        value = settings.option(spec.name, spec.default)
        if isinstance(value, bool) or type(value) is not type(spec.default):
            wanted = "a whole number" if isinstance(spec.default, int) else "text"
            errors[spec.name] = f"{spec.label} must be {wanted}."
    return errors


def validate_llama_server(settings: ServerSettings) -> Validation:
    """llama-server's own checks: the model file, its options, the extra flags, unsupported fields."""
    errors = _option_types(settings)
    warnings: dict[str, str] = {}
    if "model_path" not in errors:
        chosen = model_path(settings)
        problem = model_file_problem(chosen) if chosen else MODEL_MISSING
        if problem:
            errors["model_path"] = problem
    if "n_gpu_layers" not in errors and not -1 <= n_gpu_layers(settings) <= 999:
        errors["n_gpu_layers"] = "GPU layers must be between -1 (all) and 999."
    if "threads" not in errors and not 0 <= threads(settings) <= 1024:
        errors["threads"] = "Threads must be between 0 (llama-server decides) and 1024."
    chosen_binary = configured_binary(settings)
    if "binary" not in errors and chosen_binary:
        path = os.path.expanduser(chosen_binary)
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            errors["binary"] = (f"The llama-server program {chosen_binary} does not exist or is not executable. "
                                "Fix the path, or clear it to use the bundled llama-server.")
    folder = models_dir(settings)
    if "models_dir" not in errors and folder and not os.path.isdir(os.path.expanduser(folder)):
        warnings["models_dir"] = f"The models folder {folder} does not exist."
    for name, reason in UNSUPPORTED.items():
        if getattr(settings, name) != getattr(_DEFAULTS, name):
            warnings[name] = f"Ignored: {reason}"
    extra_errors = check_extra_flags(settings.extra_settings)
    if extra_errors:
        text = "; ".join(extra_errors)
        errors["extra_settings"] = text if text.endswith("?") else text + "."
    exposure = exposure_of(settings, LLAMA_SERVER_TUNING)
    origins = " ".join(shlex.quote(origin) for origin in open_origins(settings))
    if exposure.others and not exposure.allowed:
        errors["network_allowed_for"] = (
            f"{CORS_FLAG} {origins} lets web pages from other sites call the server from your browser, and its "
            f"API has no authentication. Tick “Allow network access on {settings.host}” to confirm, or remove "
            "that line from the extra flags (ollama-deck lets in pages from this machine only).")
    elif exposure.others:
        warnings["extra_settings"] = f"{CORS_FLAG} {origins} lets web pages from other sites use the server."
    return Validation(errors, warnings)


class LlamaServerTuning:
    """The TuningMapping of llama-server (see app.core.server.mapping)."""

    kind = KIND
    delivery = "flags"  # command-line flags, read when llama-server starts
    texts = TEXTS
    options = OPTIONS
    server_defaults = SERVER_DEFAULTS

    def setting_name(self, field: str) -> str:
        """The flag behind a field or option ('' for app preferences)."""
        return FIELD_FLAGS.get(field, "")

    def unsupported(self) -> Mapping[str, str]:
        """Keep-alive and max queue: llama-server has no such flags."""
        return UNSUPPORTED

    def validate(self, settings: ServerSettings) -> Validation:
        """The shared checks, then llama-server's own."""
        return validate(settings).merged(validate_llama_server(settings))

    def mapping_text(self, settings: ServerSettings) -> list[str]:
        """The exact command line, shell-quoted, one flag per line."""
        return mapping_text(settings)

    def label(self, name: str) -> str:
        """The form's label of a field or option."""
        return field_or_option_label(OPTIONS, TEXTS, name)

    def exposures(self, settings: ServerSettings) -> tuple[str, ...]:
        """A --cors-origins line in the extra flags that lets other web sites in (see exposures())."""
        return exposures(settings)

    def default_context_length(self, version: str | None, gpu_total_bytes: int | None,
                               gpu_overhead_bytes: int = 0) -> int | None:
        """None: without -c each llama-server slot gets the model's training context, cut by --fit only where the
        GPU cannot hold it (a rule of the model, not a fixed number by GPU size)."""
        return None


LLAMA_SERVER_TUNING = LlamaServerTuning()


def llama_server_settings(settings: ServerSettings | None = None, **options: int | str) -> ServerSettings:
    """settings (default: the defaults, on llama-server's port 8080) with this backend's options set."""
    unknown = set(options) - {spec.name for spec in OPTIONS}
    if unknown:
        raise TypeError(f"not a llama-server option: {', '.join(sorted(unknown))}")
    base = settings or ServerSettings(backend=KIND, port=8080)
    return base.with_options(**options)


__all__ = ["FIELD_FLAGS", "FORM_FLAGS", "KIND", "LLAMA_SERVER_TUNING", "LlamaServerTuning", "MODEL_MISSING",
           "OPTIONS", "REFUSED_FLAGS", "SERVER_DEFAULTS", "UNSUPPORTED", "arguments", "binary", "check_extra_flags", "command", "configured_binary",
           "exposures", "extra_flags", "llama_server_settings", "mapping_text", "model_file_problem", "model_path",
           "models_dir", "n_gpu_layers", "open_origins", "threads", "validate_llama_server"]
