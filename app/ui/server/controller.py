"""The server's view-model for the pages: one object over three focused ones (lifecycle and apply
rules, the status poller, the shared model lookups), with the signals and methods pages use.

It owns no I/O itself: the parts schedule the supervisor's coroutines on the asyncio loop thread
and turn their results and callbacks into queued signals, so widgets only run on the GUI thread."""

from __future__ import annotations

import concurrent.futures
import logging
from collections.abc import Callable
from typing import TypeVar

from PySide6.QtCore import QObject, SignalInstance

from app.core.ports.tasks import CoroutineRunner
from app.core.memory.estimator import VramEstimate
from app.core.models import LocalModel, RunningModel
from app.core.ports.catalog import CatalogFactory
from app.core.ports.server import ServerControl
from app.core.server.applied import SettingsKeeping
from app.core.server.settings import ServerSettings
from app.core.server.state import ServerStatus
from app.services.guarded_apply import GuardedApplier
from app.ui.server.lifecycle import ServerLifecycle
from app.ui.server.loop_gate import LoopGate
from app.ui.server.model_lookups import ModelLookups
from app.ui.server.status_poller import PS_POLL_S, StatusPoller

log = logging.getLogger(__name__)
T = TypeVar("T")

# Makes the server's supervisor reporting to (on_status, on_log), both called on the loop thread.
ServerMaker = Callable[[Callable[[ServerStatus], None], Callable[[str], None]], ServerControl]

__all__ = ["PS_POLL_S", "ServerController", "ServerMaker"]


def _tapped(tap: Callable[[T], None], value: T) -> None:
    """One tap's call: a failing tap is logged and never reaches the supervisor."""
    try:
        tap(value)
    except Exception:  # noqa: BLE001 - what a tap does must not take the server's callbacks down
        log.exception("a server tap failed")


class ServerController(QObject):
    """Lifecycle (probe/start/stop/apply, holds, busy), status (state, log, loaded models) and model
    lookups (list, shape) of one server; each part is also reachable on its own."""

    # The parts' signals, re-exposed under the names the pages connect to.
    status_changed: SignalInstance  # ServerStatus
    log_lines: SignalInstance  # list[str], batched at most ~10 times a second
    running_models_changed: SignalInstance  # list[RunningModel]
    version_changed: SignalInstance  # str
    busy_changed: SignalInstance  # bool
    error: SignalInstance  # a user-facing message
    settings_applied: SignalInstance  # ServerSettings now in force (saved)
    apply_checked: SignalInstance  # ApplyReport after a guarded apply
    held_changed: SignalInstance  # why start/stop/apply are reserved; "" when free
    models_listed: SignalInstance  # list[LocalModel]
    model_shape_ready: SignalInstance  # name, ModelShape | None, error text
    model_params_ready: SignalInstance  # name, the model's own num_ctx | None, num_batch | None

    def __init__(
        self,
        loop: CoroutineRunner,
        supervisor: ServerControl | None,
        client_factory: CatalogFactory,
        save_settings: Callable[[ServerSettings], object],
        parent: QObject | None = None,
        applier: GuardedApplier | None = None,
        last_good: ServerSettings | None = None,
        keeping: SettingsKeeping = SettingsKeeping.SAVED,
    ) -> None:
        """`keeping` says what `save_settings` does with applied settings (saved, or kept for the session)."""
        super().__init__(parent)
        self.keeping = keeping
        self._loop = loop
        self._supervisor = supervisor
        self._log_taps: list[Callable[[str], None]] = []
        self._status_taps: list[Callable[[ServerStatus], None]] = []
        self._gate = LoopGate(loop, lambda: self._supervisor)
        self.lifecycle = ServerLifecycle(self._gate, save_settings, applier, last_good, self)
        self.poller = StatusPoller(self._gate, client_factory, self)
        self.lookups = ModelLookups(self._gate, client_factory, self)
        if supervisor is not None:
            self.poller.reset(supervisor.status)
        for part, names in ((self.poller, ("status_changed", "log_lines", "running_models_changed",
                                           "version_changed")),
                            (self.lifecycle, ("busy_changed", "error", "settings_applied", "apply_checked",
                                              "held_changed")),
                            (self.lookups, ("models_listed", "model_shape_ready", "model_params_ready"))):
            for name in names:
                setattr(self, name, getattr(part, name))

    @classmethod
    def serving(cls, loop: CoroutineRunner, make_server: ServerMaker, client_factory: CatalogFactory,
                save_settings: Callable[[ServerSettings], object], *,
                make_applier: Callable[[ServerControl], GuardedApplier] | None = None,
                last_good: ServerSettings | None = None,
                keeping: SettingsKeeping = SettingsKeeping.SAVED) -> ServerController:
        """A controller with its supervisor, made by `make_server(on_status, on_log)` with this controller's
        callbacks (and its guarded applier, `make_applier(supervisor)`), in one step: the supervisor reports
        to the controller and the controller drives the supervisor, so neither can be made whole first."""
        controller = cls(loop, None, client_factory, save_settings, last_good=last_good, keeping=keeping)
        supervisor = make_server(controller.on_status, controller.on_log)
        controller.attach_supervisor(supervisor, make_applier(supervisor) if make_applier is not None else None)
        return controller

    def attach_supervisor(self, supervisor: ServerControl, applier: GuardedApplier | None = None) -> None:
        """Set the supervisor (and its guarded applier) when they need this controller's callbacks."""
        self._supervisor = supervisor
        self.poller.reset(supervisor.status)
        if applier is not None:
            self.lifecycle.applier = applier

    def tap(self, *, on_log: Callable[[str], None] | None = None,
            on_status: Callable[[ServerStatus], None] | None = None,
            on_loaded: Callable[[list[RunningModel]], None] | None = None) -> None:
        """Also hand every log line, every status and every successful read of the loaded models to these, on
        the thread they arrive on (the loop thread), before the GUI thread sees them; they must not block."""
        if on_log is not None:
            self._log_taps.append(on_log)
        if on_status is not None:
            self._status_taps.append(on_status)
        if on_loaded is not None:
            self.poller.tap_loaded(on_loaded)

    # --- supervisor callbacks (loop thread) ---------------------------------------------------
    def on_status(self, status: ServerStatus) -> None:
        """Supervisor callback (loop thread): re-emitted as a queued signal."""
        for tap in self._status_taps:
            _tapped(tap, status)
        self.poller.on_status(status)

    def on_log(self, line: str) -> None:
        """Supervisor callback (loop thread): buffered, flushed on the GUI thread."""
        self.poller.on_log(line)
        for tap in self._log_taps:
            _tapped(tap, line)

    # --- state ------------------------------------------------------------------------------
    @property
    def supervisor(self) -> ServerControl | None:
        """The server's supervisor (None until attached), for work that drives it directly, as a sweep does."""
        return self._supervisor

    @property
    def status(self) -> ServerStatus:
        """The latest status seen on the GUI thread."""
        return self.poller.status

    @property
    def settings(self) -> ServerSettings:
        """The settings the server runs with (or starts with); before a supervisor is attached, the last good
        ones it will be made with."""
        if not self._gate.has_server and self.last_good is not None:
            return self.last_good
        return self._gate.server.settings

    @property
    def last_good(self) -> ServerSettings | None:
        """The last settings a server came up with; a broken apply rolls back to them."""
        return self.lifecycle.last_good

    @last_good.setter
    def last_good(self, settings: ServerSettings | None) -> None:
        self.lifecycle.last_good = settings

    @property
    def probed(self) -> bool:
        """True once the first probe finished (used by --screenshot)."""
        return self.lifecycle.probed

    @property
    def held_reason(self) -> str:
        """Non-empty while something else (a benchmark sweep) owns the server's lifecycle."""
        return self.lifecycle.held_reason

    @property
    def _busy(self) -> int:
        """Lifecycle actions in flight (tests wait for 0)."""
        return self.lifecycle.busy

    # --- lifecycle --------------------------------------------------------------------------
    def hold(self, reason: str) -> None:
        """Reserve the server: start, stop and apply are refused with `reason` until release()."""
        self.lifecycle.hold(reason)

    def release(self) -> None:
        """End a hold()."""
        self.lifecycle.release()

    def probe(self) -> concurrent.futures.Future[ServerStatus]:
        """Find the binary and look at host:port."""
        return self.lifecycle.probe()

    def start(self) -> concurrent.futures.Future[ServerStatus]:
        """Start a managed server (or attach to one that already answers)."""
        return self.lifecycle.start()

    def stop(self) -> concurrent.futures.Future[ServerStatus]:
        """Stop the managed server; refused for an attached one."""
        return self.lifecycle.stop()

    def apply(self, settings: ServerSettings, then_start: bool = False, model: str | None = None,
              predicted: VramEstimate | None = None, keep: bool = True) -> concurrent.futures.Future[ServerStatus]:
        """Save and apply the settings (see ServerLifecycle.apply; `keep=False` applies without saving)."""
        return self.lifecycle.apply(settings, then_start, model, predicted, keep)

    # --- model lookups ----------------------------------------------------------------------
    def publish_models(self, models: list[LocalModel]) -> None:
        """Pass a model list read elsewhere (the Models page) to every page that shows one."""
        self.lookups.publish_models(models)

    def list_models(self) -> concurrent.futures.Future[None]:
        """Read the local models; the result arrives as models_listed."""
        return self.lookups.list_models()

    def fetch_model_shape(self, name: str) -> concurrent.futures.Future[None]:
        """Read a model's metadata; arrives as model_shape_ready."""
        return self.lookups.fetch_model_shape(name)

    # --- process ----------------------------------------------------------------------------
    def server_pids(self) -> list[int]:
        """PIDs of the server process tree (thread-safe read for the sampler)."""
        try:
            return list(self._gate.server.server_pids())
        except Exception:  # a vanished process (or no supervisor yet) must never break sampling
            return []

    def shutdown(self, timeout_s: float = 10.0) -> None:
        """Stop polling and the managed server (blocking; call on quit)."""
        if self._gate.closed:
            return
        self._gate.close()
        self.poller.stop()
        if not self._gate.has_server:
            return
        try:
            self._loop.run(self._gate.server.close(), timeout=timeout_s)
        except Exception as exc:  # quitting must go on even if the server misbehaves
            log.warning("closing the supervisor failed: %s", exc)
