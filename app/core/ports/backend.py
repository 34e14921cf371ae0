"""What a backend is to the rest of the app: a name, what it can do, and the factories of its seams.

Pages and services ask a BackendSpec's capabilities, never its name; the composition roots pick
the spec from app.backends.registry and hand it down."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence, Set
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Protocol

from app.core.console.reply_words import ReplyWords
from app.core.memory.launch_plan import SettingsPlanner
from app.core.server.process import ProcessSignature
from app.core.ports.catalog import CatalogFactory
from app.core.ports.log_signals import LogSignalReaderFactory
from app.core.ports.inference import ConsoleClientFactory, PromptCounterFactory, StreamingClientFactory
from app.core.ports.planner import LoadPlanner
from app.core.ports.server import ServerControl
from app.core.ports.telemetry import ServerTelemetryFactory
from app.core.server.mapping import TuningMapping
from app.core.server.settings import ServerSettings
from app.core.server.state import ServerStatus

@dataclass(frozen=True)
class Capabilities:
    """What a backend's server and API can do; a page offers a control only where this says so."""

    pull: bool = False  # download models from a registry through the server
    create: bool = False  # make a model variant with its own defaults (num_ctx, num_batch, quantization)
    delete: bool = False  # remove a stored model
    lists_loaded: bool = False  # say which models are in memory now, with their VRAM share
    load_unload: bool = False  # load a model ahead of the first prompt, and free it on request
    restarts_with_settings: bool = False  # a managed server restarts to apply tuning settings
    reports_slots: bool = False  # per-slot state (a /slots endpoint)
    server_metrics: bool = False  # server-wide counters (a /metrics endpoint)
    thinking_control: bool = False  # a request can switch a model's thinking on or off

    def names(self) -> list[str]:
        """The capability names that are True."""
        return [f.name for f in fields(self) if getattr(self, f.name)]


@dataclass(frozen=True)
class CommandWords:
    """What the headless commands tell a user at a shell about this backend's server: how to start it
    and how to get a model, in commands, never in the GUI's pages. `{model}` stands for the model named."""

    start_hint: str = "Is the server running? Start it, or check --url."
    model_hint: str = "Check the model name, or list the server's models."
    a_server: str = "a server"  # one server of this kind in a sentence, with its article
    # How to give a server that lists no model its first one (the pre-flight's fix).
    first_model: str = "Start the server with a model."


class VariantVerdict(Protocol):
    """The check of a create-variant form: field -> message, and the request when it is valid."""

    @property
    def errors(self) -> Mapping[str, str]:
        """Messages that block creating, by field."""
        ...

    @property
    def warnings(self) -> Mapping[str, str]:
        """Messages worth reading, by field."""
        ...

    @property
    def body(self) -> dict[str, Any] | None:
        """The create request, None while a field is wrong."""
        ...

    @property
    def ok(self) -> bool:
        """True when the variant can be created."""
        ...


class ModelStoreRules(Protocol):
    """A backend's rules and words for its model store: which quantizations a variant may ask for,
    how a variant form is checked, and what a failed pull or an impossible tag means."""

    @property
    def quantize_choices(self) -> Sequence[str]:
        """Quantizations a new variant can be made with (empty: none)."""
        ...

    def check_variant(self, base: str, name: str, num_ctx: int | None, num_batch: int | None, quantize: str = "",
                      *, local_names: Set[str] = frozenset(), base_quantization: str = "",
                      training_context: int | None = None, parameter_count: int | None = None,
                      gpu_total_bytes: int | None = None) -> VariantVerdict:
        """Check a create-variant form (context and batch in tokens, GPU memory in bytes)."""
        ...

    def quantization_advice(self, typed: str, parameter_count: int | None, gpu_total_bytes: int | None) -> str:
        """What to know about a typed model name's quantization (empty when nothing); bytes for the GPU."""
        ...

    def pull_failure_hint(self, model: str, message: str) -> str:
        """What to do after a pull failed with the server's `message`."""
        ...

    def variant_request_text(self, body: Mapping[str, Any]) -> str:
        """The create-variant request exactly as it will be sent, for the form's preview."""
        ...


class ServerFactory(Protocol):
    """Makes a backend's server supervisor for the given settings, reporting through the callbacks
    (called on the asyncio loop thread)."""

    def __call__(self, settings: ServerSettings, *, on_status: Callable[[ServerStatus], None],
                 on_log: Callable[[str], None], runtime_dir: Path | None = None) -> ServerControl:
        """runtime_dir: where records of started servers are kept (None: the user state folder)."""
        ...


@dataclass(frozen=True)
class BackendSpec:
    """One inference server kind: its display name, capabilities and seam factories."""

    name: str  # registry key (a folder name under app/backends/)
    display_name: str  # for people, as the server's makers write its name
    capabilities: Capabilities
    catalog: CatalogFactory
    console: ConsoleClientFactory  # the prompt console's client: models, details, streamed chats
    load_client: StreamingClientFactory  # the load generator's client
    server: ServerFactory
    model_rules: ModelStoreRules
    tuning: TuningMapping  # how the shared settings become this server's options, and the exact text
    # Why a capability is missing, in words for the user (capability name -> sentence).
    missing_reasons: Mapping[str, str] = field(default_factory=dict)
    # Reads the running server's slots, queue and counters (None: the server reports none of them).
    server_telemetry: ServerTelemetryFactory | None = None
    # Makes the factories that depend on the settings in force (e.g. a models folder the catalog lists);
    # None: the factories above need only a URL.
    binder: Callable[[BackendSpec, Callable[[], ServerSettings]], BackendSpec] | None = None
    # What the server calls a reply's figures (the Prompt page labels them so).
    reply_words: ReplyWords = field(kw_only=True)
    # What the headless commands say about starting the server and getting a model.
    command_words: CommandWords = field(default_factory=CommandWords)
    # The launch the server really makes for a model with the settings (what the memory estimate prices).
    planner: LoadPlanner = field(default_factory=SettingsPlanner)
    # How the server's processes look, so a scan names the server it finds (none: it recognises no process).
    process: ProcessSignature = field(default_factory=lambda: ProcessSignature(frozenset(), "the server"))
    # Counts prompts in the server's own tokens (None: it cannot, so prompt lengths are estimated and only the
    # server's own sign says a prompt was cut).
    prompt_counter: PromptCounterFactory | None = None
    # Reads the server's log into the watchdog's signals (None: its log says nothing the watchdog reads).
    log_signals: LogSignalReaderFactory | None = None

    def bound(self, settings: Callable[[], ServerSettings]) -> BackendSpec:
        """This spec with factories that read `settings()` (the settings in force) whenever they make a client."""
        return self if self.binder is None else self.binder(self, settings)

    def can(self, capability: str) -> bool:
        """True when the backend has `capability` (a Capabilities field name)."""
        if capability not in {f.name for f in fields(Capabilities)}:
            raise KeyError(f"unknown capability {capability!r}")
        return bool(getattr(self.capabilities, capability))

    def why_not(self, capability: str) -> str:
        """Why `capability` is unavailable (empty when it is available)."""
        if self.can(capability):
            return ""
        words = capability.replace("_", " ")
        return self.missing_reasons.get(capability, f"{self.display_name} does not offer this ({words}).")


__all__ = ["BackendSpec", "Capabilities", "CommandWords", "ModelStoreRules", "ServerFactory", "VariantVerdict"]
