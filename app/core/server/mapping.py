"""How a backend turns the shared settings into what its server reads, as the form needs to know it.

A page never asks which server it drives: it shows the backend's option fields, the name each
setting gets there (an environment variable, a flag such as `-np`), why a setting cannot be set on that server,
and the exact lines the server will get. Each backend implements TuningMapping;
NeutralTuning is the mapping of no particular server (the shared checks, nothing translated).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from app.core.server.settings import FIELD_LABELS, ServerSettings, Validation, validate

# The kinds of editor an option needs.
COUNT = "count"  # a whole number
MEBIBYTES = "mib"  # a whole number of MiB
DIRECTORY = "directory"  # a folder path
PROGRAM = "program"  # a file path to a program
MODEL_FILE = "model_file"  # a file path to a model file (a GGUF)
OPTION_KINDS = (COUNT, MEBIBYTES, DIRECTORY, PROGRAM, MODEL_FILE)


@dataclass(frozen=True)
class OptionSpec:
    """One knob only this backend has: how to edit it and what it is called on the server."""

    name: str
    label: str
    kind: str
    default: int | str
    hint: str = ""
    setting: str = ""  # what the server calls it, e.g. an environment variable; "" for app preferences
    low: int = 0
    high: int = 0
    step: int = 1
    placeholder: str = ""
    group: str = "paths"  # "memory" (beside parallel and context) or "paths" (advanced)

    def value_in(self, settings: ServerSettings) -> Any:
        """This option's value in settings, or its default when unset or of the wrong type."""
        value = settings.option(self.name, self.default)
        if type(value) is not type(self.default):  # True is not a count, 3 is not a path
            return self.default
        return value


@dataclass(frozen=True)
class MappingTexts:
    """The backend's words for what the form shows."""

    server_name: str = "the server"  # as in "Auto — the server decides"
    context_default: str = "Default (the server decides)"
    context_hint: str = "Tokens per request slot, e.g. 8192 or 32k."
    flash_auto: str = "Auto — the server decides"
    extra_label: str = "Extra settings"
    extra_hint: str = "Settings the form does not cover, one per line; # starts a comment."
    extra_placeholder: str = ""
    mapping_title: str = "What the server gets"
    defaults_note: str = "# everything else: the server's default"


@dataclass(frozen=True)
class ServerDefaults:
    """The tuning a server runs with when it is told none (its own defaults), as the shared settings start it
    so, and those defaults in the server's own words (e.g. "-np auto (the server's default): 4 slots …").

    `extra_lines` are extra-settings lines a field cannot say: where setting a field explicitly changes more
    than the field (a server that turns off its unified KV cache when its slot count is given), they give the
    rest back."""

    num_parallel: int = 1
    context_length: int | None = None  # None: the server picks (the model's, or its own default)
    kv_cache_type: str = "f16"
    flash_attention: str = "auto"
    extra_lines: tuple[str, ...] = ()
    words: tuple[str, ...] = ()

    def apply(self, settings: ServerSettings) -> ServerSettings:
        """`settings` with the tuning at the server's defaults (parallel, context, KV cache, flash attention, the
        batch sizes); everything else — host, port, model file, the backend's options, extra settings — kept."""
        extra = settings.extra_settings
        have = {line.strip() for line in extra.splitlines()}
        missing = [line for line in self.extra_lines if line not in have]
        if missing:
            extra = "\n".join([extra.rstrip("\n"), *missing]) if extra.strip() else "\n".join(missing)
        return settings.replace(num_parallel=self.num_parallel, context_length=self.context_length,
                                kv_cache_type=self.kv_cache_type, flash_attention=self.flash_attention,
                                batch_size=None, micro_batch_size=None, extra_settings=extra)

    def text(self) -> str:
        """The defaults in the server's words, as one line ('' when it has none)."""
        return "; ".join(self.words)


def field_or_option_label(options: tuple[OptionSpec, ...], texts: MappingTexts, name: str) -> str:
    """The form's label of a backend option, the extra-settings box, or a shared field (its name if none)."""
    spec = next((s for s in options if s.name == name), None)
    if spec is not None:
        return spec.label
    return texts.extra_label if name == "extra_settings" else FIELD_LABELS.get(name, name)


class TuningMapping(Protocol):
    """A backend's view of the settings: its options, its names, its checks, its exact lines."""

    kind: str  # the backend's name, under which the settings file keeps its options
    delivery: str  # how the settings reach the server: "environment" (read at start) or "flags"
    texts: MappingTexts
    options: tuple[OptionSpec, ...]
    server_defaults: ServerDefaults  # the tuning the server runs with when told none, in its own words

    def setting_name(self, field: str) -> str:
        """What the server calls a shared field or an option ('' when it has no name there)."""
        ...

    def unsupported(self) -> Mapping[str, str]:
        """Shared fields this server cannot be given at start, each with the reason and the alternative."""
        ...

    def validate(self, settings: ServerSettings) -> Validation:
        """The shared checks plus this backend's own (options, extra settings, unsupported fields)."""
        ...

    def mapping_text(self, settings: ServerSettings) -> list[str]:
        """The exact lines the server gets for these settings (variables or a command line)."""
        ...

    def label(self, name: str) -> str:
        """A field's or option's label for messages a user reads."""
        ...

    def exposures(self, settings: ServerSettings) -> tuple[str, ...]:
        """Who besides this machine's programs this server's own settings let call it, beyond the bind
        address (e.g. "any web page you open", naming the setting that allows it); () when none. See exposure.py."""
        ...

    def default_context_length(self, version: str | None, gpu_total_bytes: int | None,
                               gpu_overhead_bytes: int = 0) -> int | None:
        """The context per request (tokens) the server picks by itself when none is set, where it picks
        it by the GPU's memory (bytes; None: no GPU known); None when the server has no such rule."""
        ...


class NeutralTuning:
    """The mapping of no particular server: shared checks, no options, the fields as name = value."""

    kind = ""
    delivery = ""
    texts = MappingTexts()
    options: tuple[OptionSpec, ...] = ()
    server_defaults = ServerDefaults(words=("parallel 1; context, KV cache and flash attention as the server "
                                            "decides",))

    def setting_name(self, field: str) -> str:
        """No server, no names."""
        return ""

    def unsupported(self) -> Mapping[str, str]:
        """Every shared field can be written down."""
        return {}

    def validate(self, settings: ServerSettings) -> Validation:
        """The shared checks only."""
        return validate(settings)

    def mapping_text(self, settings: ServerSettings) -> list[str]:
        """The shared fields that differ from their defaults, as name = value."""
        defaults = ServerSettings()
        return [f"{name} = {getattr(settings, name)}" for name in FIELD_LABELS
                if name not in ("options", "backend") and getattr(settings, name) != getattr(defaults, name)]

    def label(self, name: str) -> str:
        """The shared label."""
        return FIELD_LABELS.get(name, name)

    def exposures(self, settings: ServerSettings) -> tuple[str, ...]:
        """No server, no settings of its own that open it."""
        return ()

    def default_context_length(self, version: str | None, gpu_total_bytes: int | None,
                               gpu_overhead_bytes: int = 0) -> int | None:
        """No server, no default of its own."""
        return None


def option_default(mapping: TuningMapping, name: str) -> Any:
    """The default of one of the mapping's options (None when it has no such option)."""
    return next((spec.default for spec in mapping.options if spec.name == name), None)


__all__ = ["COUNT", "DIRECTORY", "MEBIBYTES", "MODEL_FILE", "field_or_option_label", "MappingTexts", "NeutralTuning", "OPTION_KINDS", "OptionSpec",
           "PROGRAM", "ServerDefaults", "TuningMapping", "option_default"]
