"""Composition root of the GUI: picks the concrete adapters and wires them to the widgets."""

from __future__ import annotations

import argparse
import atexit
import gc
import logging
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QByteArray, QObject, QTimer, Signal
from PySide6.QtGui import QIcon
from PySide6.QtWidgets import QApplication

from app.adapters.aio import LoopThread
from app.adapters.storage.apply_history import APPLY_HISTORY_FILE_NAME, ApplyHistory
from app.services.guarded_apply import GuardedApplier
from app.adapters.storage.history import HISTORY_FILE_NAME, BenchHistory
from app.adapters.storage.allowance_store import AllowanceStore
from app.adapters.storage.atomic_json import write_atomic
from app.adapters.storage.saved_format import SAVED_FORMAT
from app.adapters.telemetry.contention import contention_probes
from app.adapters.telemetry.host import HostProbe, host_memory_reader
from app.adapters.telemetry.nvml import make_gpu_backend
from app.adapters.storage import paths as storage_paths
from app.backends import registry
from app.adapters.storage.preset_store import PresetStore
from app.adapters.telemetry.sampler import Sampler
from app.adapters.storage.settings_store import LoadResult, SettingsSaveError, SettingsStore
from app.adapters.storage.ui_state import UiState, UiStateStore, with_recent
from app.core.memory.estimator import VramEstimate
from app.core.fit_feed import gpu_budget, host_budget
from app.core.server.applied import SettingsKeeping
from app.core.server.settings import ServerSettings
from app.core.server.url import settings_for_url
from app.core.server.state import ServerStatus
from app.core.ports.server import ServerControl
from app.core.telemetry import GpuBackend, GpuInfo, Sample
from app.core.watch.events import WatchEvent
from app.core.units import MIB
from app.services.runtime_learner import RuntimeLearner
from app.services.watchdog import Watchdog
from app.core.throughput import TokenMeter
from app.ui.pages.bench.page import BenchPage
from app.ui.pages.context import PageContext
from app.ui.pages.prompt.page import ConsolePage
from app.ui.server.controller import ServerController
from app.ui.server.watch import ServerWatch
from app.ui.widgets.notify import SevereNotifier, Toast, system_tray
from app.ui.widgets.watch_bridge import WatchBridge
from app.ui.app.telemetry_poller import ServerTelemetryPoller
from app.ui.app.qt_platform import screenshot_platform
from app.ui.pages.dashboard.page import DashboardPage
from app.ui.app.gc_policy import GuiThreadCollection
from app.ui.app.fleet_setup import behind_the_balancer, fleet_page
from app.ui.app.window import DEFAULT_SIZE, MainWindow
from app.ui.pages.models.page import ModelsPage
from app.ui.pages.server.page import ServerPage
from app.ui.pages.server.slots_view import SlotsView
from app.ui.widgets.theme import app_icon_path, apply_theme
from app.ui.app.store_report import FILES_HEADING, SETTINGS_HEADING, StoreReport
from app.ui.app import embedded, exporter_switch, preflight
from app.ui.app.stage import Stage, StepRecorder
from app.ui.presenter.preflight import PreflightDialog
from app.adapters.demo_script import BUILTIN as BUILTIN_SCRIPT, load_script

log = logging.getLogger(__name__)

SCREENSHOT_TIMEOUT_S = 20.0
SCREENSHOT_MIN_SAMPLES = 3


class GpuLossWatch(QObject):
    """Turns 'the GPU stopped answering' seen on the sampler thread into one queued signal."""

    lost = Signal(str)  # the backend's reason

    def __init__(self, gpu: GpuBackend) -> None:
        super().__init__()
        self._gpu = gpu
        self._had_gpu = gpu.available
        self._reported = False

    def on_sample(self, sample: Sample) -> None:
        """Sampler callback (sampler thread)."""
        if self._had_gpu and sample.gpu is None and not self._reported:
            self._reported = True
            self.lost.emit(self._gpu.unavailable_reason)


def page_context(deck: DeckApp, config_dir: Path | None) -> PageContext:
    """What every page gets from this root: the spec, the server view-model, the loop, the GPU, the sampler's
    and the server's telemetry, the token meter and the stores (presets, benchmark history)."""
    telemetry = deck.telemetry
    return PageContext(
        backend=deck.backend, server=deck.controller, loop=deck.loop, gpu=deck.gpu, write_file=write_atomic,
        server_labels=registry.display_names(), saved_format=SAVED_FORMAT,
        samples=deck.sampler.buffers, server_ring=telemetry.ring if telemetry.enabled else None, meter=deck.meter,
        presets=PresetStore(deck.store.config_dir),
        history=BenchHistory(config_dir / HISTORY_FILE_NAME if config_dir else None),
        host_memory=host_memory_reader(deck.controller.server_pids), contention=contention_probes(deck.gpu),
        watchdog=deck.watchdog, runtime_allowance=deck.learner)


class DeckApp:
    """Everything the running GUI owns, so that it can be built and torn down in one place."""

    def __init__(self, args: argparse.Namespace, window: MainWindow | None = None,
                 watchdog: Watchdog | None = None) -> None:
        """Build everything for args; with window, take over that window (its pages are replaced) instead
        of opening a new one; with watchdog, go on with that one's events (one history for the window)."""
        self._closed = False
        self._args = args
        # The DeckApp that took over this one's window (switch_to_embedded), if any.
        self.successor: DeckApp | None = None
        self.collection = GuiThreadCollection()
        # --demo: the embedded engine (bundled llama-server and model); ValueError says what to install.
        self.demo = bool(getattr(args, "demo", False))
        # A picture (or one per demo step) is taken and the app quits: nothing of the user's is read or kept.
        self._screenshot = bool(getattr(args, "screenshot", None) or getattr(args, "screenshot_each", None))
        self.screenshot_timer: QTimer | None = None
        self.recorder: StepRecorder | None = None
        self._preflight: PreflightDialog | None = None
        config_dir = Path(args.config_dir) if args.config_dir else None
        # The one place the backend is chosen; pages get the spec and ask its capabilities.
        chosen = embedded.BACKEND if self.demo else getattr(args, "backend", None)
        # Bound to the settings in force: factories that need more than a URL (a models folder) read them.
        self.backend = registry.get(chosen or registry.DEFAULT_BACKEND).bound(lambda: self.controller.settings)
        self.store = SettingsStore(config_dir, self.backend.tuning)
        # A settings folder that cannot be written: every store keeps working in memory, and the banner says so.
        self.config_problem = storage_paths.folder_problem(self.store.config_dir)
        loaded, settings = self._starting_settings(args)
        self.loop = LoopThread()
        self.meter = TokenMeter()
        self.gpu = make_gpu_backend()
        self.history = ApplyHistory(config_dir / APPLY_HISTORY_FILE_NAME if config_dir else None)
        self.controller = self._server_controller(settings, args.config_dir or None)
        self.supervisor = self.controller.supervisor
        self.gpu_watch = GpuLossWatch(self.gpu)
        # What the server does without saying so: fed on the threads that read it, never the GUI thread.
        self.watchdog = watchdog if watchdog is not None else Watchdog()
        # The runtime allowance of this GPU model and driver, learnt from the loads the app sees (fed with the
        # watchdog) and kept in the config folder; every price on this card uses it.
        self.learner = RuntimeLearner(AllowanceStore(self.store.config_dir), self.gpu.info())
        self.watch = ServerWatch(self.watchdog, self.backend.log_signals, lambda: self.controller.settings,
                                 gpu_available=self.gpu.available, learner=self.learner)
        self.controller.tap(on_log=self.watch.on_log, on_status=self.watch.on_status,
                            on_loaded=self.watch.on_loaded)
        self.controller.settings_applied.connect(self.watch.settings_applied)

        def on_sample(sample: Sample) -> None:
            self.gpu_watch.on_sample(sample)
            self.watch.on_sample(sample)

        self.sampler = Sampler(
            self.gpu, HostProbe(), server_pids=self.controller.server_pids, token_meter=self.meter,
            on_sample=on_sample)
        self._own_window = window is None
        self.window = self._take_window(window)
        # The server's own report (slots, queue, counters), polled only where the backend has one.
        self.telemetry = ServerTelemetryPoller(self.loop, self.backend, lambda: self.controller.settings.base_url)
        self.telemetry.tap(self.watch.on_server_sample)
        self.controller.status_changed.connect(self.telemetry.on_status)
        self.exporter = exporter_switch.install(self.window.header, self.loop, self.backend.name, self.gpu.info(),
                                                lambda: self.sampler.latest, self.controller, self.telemetry)
        context = page_context(self, config_dir)
        self._stage: Stage | None = None
        self._add_pages(context)
        self.stage = self._stage = self._set_the_stage(context, args)
        self.gpu_watch.lost.connect(self._on_gpu_lost)
        self.store_report = self._report_store_problems(loaded.problems)
        self.embedded_offer = self._offer_embedded(args)
        self._restore_ui_state(args)
        self.notifier = self._notify_severe_events()
        self._loaded_vram = 0
        self.controller.running_models_changed.connect(
            lambda models: setattr(self, "_loaded_vram", sum(m.size_vram_bytes or 0 for m in models)))
        self._gpu_feed = QTimer()
        self._gpu_feed.setInterval(1000)
        self._gpu_feed.timeout.connect(self._feed_fit_panel)
        self._feed_fit_panel()

    # ---- building (called once, from __init__) ------------------------------------------------
    def _starting_settings(self, args: argparse.Namespace) -> tuple[LoadResult, ServerSettings]:
        """What the saved file held (with its problems) and the settings to start with: the embedded engine's
        in demo mode, else the saved ones; --url sets host and port."""
        # --demo leaves the saved settings alone: not read (a read may convert an older format or move a damaged
        # file aside), not written (see _save_settings).
        loaded = LoadResult(ServerSettings()) if self.demo else self.store.load()
        settings = embedded.demo_settings() if self.demo else loaded.settings
        if args.url:
            settings = settings_for_url(settings, args.url)
        return loaded, settings

    def _server_controller(self, settings: ServerSettings, config_dir: str | None) -> ServerController:
        """The server's view-model over the backend's supervisor for `settings`, applying through the guard."""
        catalog = self.backend.catalog
        runtime_dir = storage_paths.runtime_dir(config_dir)

        def make_server(on_status: Callable[[ServerStatus], None], on_log: Callable[[str], None]) -> ServerControl:
            return self.backend.server(settings, on_status=on_status, on_log=on_log, runtime_dir=runtime_dir)

        return ServerController.serving(
            self.loop, make_server, catalog, self._save_settings,
            make_applier=lambda server: GuardedApplier(server, catalog, self.gpu, record=self.history.add),
            last_good=settings, keeping=SettingsKeeping.for_session(self.demo, bool(self.config_problem)))

    def _take_window(self, window: MainWindow | None) -> MainWindow:
        """A new window, or `window` emptied for this DeckApp, its header naming this server and GPU."""
        server_name = embedded.demo_label() if self.demo else self.backend.display_name
        if window is None:
            window = MainWindow(self.controller, server_name)
        else:
            window.reset(self.controller, server_name)
        window.header.set_gpu(self.gpu.info(), self.gpu.unavailable_reason)
        return window

    def _add_pages(self, context: PageContext) -> None:
        """The five pages on one context, and what connects them to each other and to the pollers."""
        self.dashboard = DashboardPage(context)
        self.telemetry.notice_changed.connect(self.dashboard.server.set_notice)
        self.server_page = ServerPage(context)
        if self.telemetry.enabled and self.backend.can("reports_slots"):
            slots_view = SlotsView()
            self.telemetry.sample_ready.connect(slots_view.set_sample)
            self.telemetry.notice_changed.connect(slots_view.set_notice)
            self.telemetry.stopped.connect(slots_view.clear)
            self.server_page.show_slots(slots_view)
        self.window.add_page("dashboard", "Dashboard", self.dashboard)
        self.window.add_page("server", "Server", self.server_page)
        # The fit panel's price of the settings being edited is the dashboard's dashed estimate line, and what
        # the watchdog holds a server started with those settings to.
        self.server_page.fit_panel.estimate_changed.connect(self._show_estimate)
        self._show_estimate(self.server_page.fit_panel.estimate)
        self.console_page = ConsolePage(context)
        self.models_page = ModelsPage(context)
        # The Models page's verdicts price the same GPU as the fit panel: what others hold, the runtime allowance.
        self.server_page.fit_panel.gpu_changed.connect(self.models_page.set_gpu_memory)
        self.models_page.set_gpu_memory(self.server_page.fit_panel.gpu_memory())
        if self.gpu.info() is None:
            # No NVIDIA GPU here: price the Models page on the card chosen in the Server page's fit panel.
            card = self.server_page.fit_panel.card_combo
            card.currentIndexChanged.connect(lambda _i: self._price_models_on_chosen_card())
            self._price_models_on_chosen_card()
        self.window.add_page("console", "Prompt", self.console_page)
        self.window.add_page("models", "Models", self.models_page)
        self.bench_page = BenchPage(context)
        self.window.add_page("bench", "Benchmark", self.bench_page)
        backends = {name: registry.get(name) for name in registry.names()}
        self.fleet_page, fleet = fleet_page(context, getattr(self._args, "fleet", None), backends)
        # Attached at the fleet's balancer: each sweep point also reads every backend behind it for its share.
        self.bench_page.sweeps.behind = behind_the_balancer(fleet, self.controller.settings.base_url, backends)
        self.window.add_page("fleet", "Fleet", self.fleet_page)

    def _set_the_stage(self, context: PageContext, args: argparse.Namespace) -> Stage:
        """Presenter mode over this window, with the script asked for (the built-in one by default)."""
        script = getattr(args, "script", None) or load_script(BUILTIN_SCRIPT)
        stage = Stage(self.window, context, self.bench_page, script, clear_dashboard=self.dashboard.clear,
                      open_preflight=self.open_preflight,
                      show_error=lambda text: self.window.banner.show_message(text, "error"),
                      stop_others=self._stop_in_flight)
        stage.view.set_estimate_mib(self._presenter_estimate_mib(self.server_page.fit_panel.estimate))
        return stage

    def _presenter_estimate_mib(self, estimate: VramEstimate | None) -> float | None:
        """The price the presenter's memory figure is held to: the GPU's at load, or on a machine without an
        NVIDIA GPU (its figure is host RAM) the host RAM the load needs."""
        if estimate is None:
            return None
        return (estimate.total_gpu_bytes if self.gpu.info() is not None else estimate.host_bytes) / MIB

    def _stop_in_flight(self) -> bool:
        """Stop the Prompt page's run and a sweep of the Benchmark page; True if either was running."""
        running = self.console_page.run is not None or self.bench_page.sweeps.running
        self.console_page.stop()
        if self.bench_page.sweeps.running:
            self.bench_page.cancel_sweep()
        return running

    def open_preflight(self) -> None:
        """The pre-flight check of this server and machine (with the script in use), in a dialog over the window;
        showing it starts the checks."""
        self._preflight = preflight.preflight_dialog(self, self.stage.director.script)
        self._preflight.show()

    def _report_store_problems(self, settings_problems: list[str]) -> StoreReport:
        """The banner's list of what the settings, presets and history files could not do."""
        report = StoreReport(self.window.banner)
        report.add(SETTINGS_HEADING, settings_problems)
        if self.config_problem:
            report.add(FILES_HEADING, [
                f"The settings folder {self.store.config_dir} cannot be written ({self.config_problem}): settings, "
                "presets and the window's place are kept for this session only. Fix it, or start with "
                "--config-dir pointing at a folder you can write."])
        report.add(FILES_HEADING, self.history.problems)
        if self.learner.problem:  # the learnt runtime figures could not be read: the default is priced
            report.add(FILES_HEADING, [self.learner.problem])
        self.bench_page.history_view.problems_found.connect(lambda problems: report.add(FILES_HEADING, problems))
        report.add(FILES_HEADING, self.bench_page.history_view.found_problems)  # if checked already
        return report

    def _offer_embedded(self, args: argparse.Namespace) -> embedded.EmbeddedOffer | None:
        """In demo mode, the banner says so; without Ollama (none installed, none answering) the first probe
        offers the embedded engine."""
        if self.demo:
            self.window.banner.show_message(embedded.demo_note(), "info")
            return None
        # What setting up the server's access warned of (an API key sent in clear to another machine), on screen too.
        warnings = [note.removeprefix("warning: ") for note in getattr(args, "access_notes", ())
                    if note.startswith("warning: ")]
        if warnings:
            self.window.banner.show_message(" ".join(w[0].upper() + w[1:] for w in warnings), "warning")
        if self.backend.name != registry.DEFAULT_BACKEND or getattr(args, "screenshot", None):
            return None
        offer = embedded.EmbeddedOffer(self.window.banner, self.switch_to_embedded, show=self.store_report.offer)
        self.controller.status_changed.connect(offer.on_status)
        return offer

    def _restore_ui_state(self, args: argparse.Namespace) -> None:
        """Where the window was left (not for --screenshot, whose images must not depend on it); a window
        taken over stays where it is. Also the Markdown switch, recent model files and the first page."""
        self.ui_store = UiStateStore(Path(args.config_dir) if args.config_dir else None)
        self.ui_state = UiState() if self._screenshot else self.ui_store.load()
        if self._own_window:
            self.window.resize(DEFAULT_SIZE)
            if self.ui_state.geometry:
                self.window.restoreGeometry(QByteArray(self.ui_state.geometry))
            self.window.fit_into_screen()  # the default or the saved size, never larger than the screen
        self.console_page.markdown_check.setChecked(self.ui_state.markdown)
        if self.ui_state.exporter_port is not None:  # it was on at the last quit
            self.exporter.set_on(True, self.ui_state.exporter_port)
        # Model files served lately (llama-server's GGUF), offered again on the Server page.
        self._recent_files = self.ui_state.recent_files
        self._remember_files(self.controller.settings)
        self.controller.settings_applied.connect(self._remember_files)
        asked = getattr(args, "page", None)
        self.first_page = asked or (self.ui_state.page if self.ui_state.page in self.window.page_names else None) \
            or "dashboard"

    def _remember_files(self, settings: ServerSettings) -> None:
        """Put the model files these settings serve first in the Recent menus."""
        for path in reversed(self.server_page.form.model_files(settings)):
            self._recent_files = with_recent(self._recent_files, path)
        self.server_page.form.set_recent_files(self._recent_files)

    def _save_settings(self, settings: ServerSettings) -> None:
        """Save applied settings; with an unwritable settings folder (said in the banner) they stay in memory."""
        if self.demo:
            return  # the embedded engine's settings last for the session; the saved ones stay as they are
        try:
            self.store.save(settings)
        except SettingsSaveError as exc:
            if not self.config_problem:
                raise
            log.warning("settings kept in memory only: %s", exc.message)

    def _feed_fit_panel(self) -> None:
        """Give the fit panel the host's free RAM, the GPU's size and what other processes use."""
        sample = self.sampler.latest
        if sample is not None:
            self.server_page.fit_panel.set_host(host_budget(sample.host))
        gpu = sample.gpu if sample is not None else None
        if gpu is None:
            if self.gpu.info() is None:
                self.server_page.fit_panel.set_gpu(None)
            return
        total, others, reserved = gpu_budget(gpu, self.controller.status.state.is_running, self._loaded_vram)
        self.server_page.fit_panel.set_gpu(total, others, reserved)

    def _show_estimate(self, estimate: VramEstimate | None) -> None:
        """The predicted server memory at load (MiB) on the dashboard's VRAM plot, or no line; the watchdog
        learns the price (planned context, fits on the GPU) for when those settings start."""
        mib = estimate.total_gpu_bytes / MIB if estimate is not None else None
        self.dashboard.set_estimate_mib(mib)
        if self._stage is not None:  # the stage is set after the pages (the first price comes before it)
            self._stage.view.set_estimate_mib(self._presenter_estimate_mib(estimate))
        self.watch.set_price(self.server_page.fit_panel.priced_settings, estimate)

    def _notify_severe_events(self) -> SevereNotifier:
        """Severe events as desktop notifications (a toast in the window without a system tray), at most one
        per kind a minute, unless turned off on the dashboard's Events tab (remembered with the window)."""
        tray = None if self._screenshot else system_tray(self.window)
        notifier = SevereNotifier(tray=tray, toast=None if tray is not None else Toast(self.window),
                                  enabled=self.ui_state.notify_severe, parent=self.window)
        self._tray = tray
        self._notify_bridge = WatchBridge(self.watchdog, notifier)
        self._notify_bridge.event_seen.connect(notifier.on_event)
        check = self.dashboard.events.notify_check
        check.setChecked(notifier.enabled)
        check.toggled.connect(notifier.set_enabled)
        # A click on the notification brings the event forward on the dashboard.
        shown: list[WatchEvent] = []
        notifier.notified.connect(shown.append)

        def bring_forward() -> None:
            self.window.show_page("dashboard")
            self.window.raise_()
            self.window.activateWindow()
            if shown:
                self.dashboard.show_event(shown[-1])

        if tray is not None:
            tray.messageClicked.connect(bring_forward)
        elif notifier.toast is not None:
            notifier.toast.clicked.connect(bring_forward)
        return notifier

    def _price_models_on_chosen_card(self) -> None:
        gib = int(self.server_page.fit_panel.card_combo.currentData())
        if gib <= 0:
            self.models_page.set_gpu(None, "No NVIDIA GPU here: the server runs on the CPU, and the Server page "
                                           "prices it against this computer's RAM. Choose a card there to see "
                                           "verdicts for that card.")
            return
        self.models_page.set_gpu(GpuInfo(name=f"a {gib} GiB card (chosen on the Server page; no NVIDIA GPU here)",
                                         driver="", memory_total_mib=gib * 1024.0))

    def _on_gpu_lost(self, reason: str) -> None:
        self.dashboard.set_gpu_unavailable_reason(reason)
        self.models_page.set_gpu(None, reason)
        self.window.header.set_gpu(None, reason)
        self.window.banner.show_message(reason, "error")

    def start(self) -> None:
        """Begin sampling and look for a server."""
        self.collection.start()  # before the threads get busy: Qt objects then die on the GUI thread only
        self.sampler.start()
        self._gpu_feed.start()
        self.controller.probe()
        if self.demo:
            self.controller.start()  # the embedded engine is ours to run: start it at once

    def switch_to_embedded(self) -> DeckApp | None:
        """Serve this window from the embedded engine, in place: this DeckApp stops (its threads, and a
        server it manages) and a demo-mode DeckApp takes over the same window on the same page, starts the
        bundled llama-server and becomes `successor`. Without the engine the banner says what to install
        and nothing changes (None)."""
        if self._closed:
            return None
        try:
            embedded.demo_settings()
        except ValueError as exc:
            self.window.banner.show_message(str(exc), "error")
            return None
        page = self.window.current_page_name()
        args = argparse.Namespace(**{**vars(self._args), "demo": True, "backend": None, "url": None,
                                     "screenshot": None, "page": page})
        self.close()
        successor = DeckApp(args, window=self.window, watchdog=self.watchdog)
        self.successor = successor
        successor.window.show_page(successor.first_page)
        successor.start()
        return successor

    @property
    def current(self) -> DeckApp:
        """The DeckApp now behind this one's window: itself, or the last one that took it over."""
        deck = self
        while deck.successor is not None:
            deck = deck.successor
        return deck

    def close(self) -> None:
        """Stop sampling, stop a managed server, stop the loop (once; later calls do nothing)."""
        if self._closed:
            return
        self._closed = True
        if not self._screenshot:
            self.ui_store.save(UiState(page=self.window.current_page_name(),
                                       geometry=bytes(self.window.saveGeometry().data()),
                                       markdown=self.console_page.markdown_check.isChecked(),
                                       recent_files=self._recent_files,
                                       notify_severe=self.notifier.enabled,
                                       exporter_port=self.exporter.port.value() if self.exporter.url else None))
        self.stage.close()
        self._gpu_feed.stop()
        self._notify_bridge.close()
        self.dashboard.shutdown()
        if self._tray is not None:
            self._tray.hide()
        if self.notifier.toast is not None:
            self.notifier.toast.deleteLater()  # a successor in this window makes its own
        self.notifier.deleteLater()
        self.exporter.close_now()
        self.exporter.deleteLater()  # a successor in this window puts its own in the header
        self.sampler.stop()
        self.telemetry.close()
        self.console_page.shutdown()
        self.models_page.shutdown()
        self.bench_page.shutdown()
        self.fleet_page.shutdown()
        self.controller.shutdown()
        self.loop.stop()
        self.gpu.close()
        self.collection.stop()


def _take_screenshot(deck: DeckApp, path: str, app: QApplication) -> None:
    """Once a few samples are in and the server probe finished (and, with the embedded engine, it runs), save the
    window as PNG and quit."""
    deadline = time.monotonic() + SCREENSHOT_TIMEOUT_S
    timer = QTimer()

    def check() -> None:
        enough = len(deck.sampler.buffers) >= SCREENSHOT_MIN_SAMPLES
        probed = deck.controller.probed and (not deck.demo or deck.controller.status.state.is_running)
        if (enough and probed and deck.fleet_page.ready) or time.monotonic() > deadline:
            timer.stop()
            deck.dashboard.redraw_now()
            app.processEvents()
            ok = deck.window.grab().save(path)
            if not ok:
                print(f"ollama-deck: could not write the screenshot to {path}", file=sys.stderr)
            app.exit(0 if ok else 1)

    timer.timeout.connect(check)
    timer.start(100)
    deck.screenshot_timer = timer  # keep it alive


def _record_each_step(deck: DeckApp, folder: Path, app: QApplication) -> None:
    """--screenshot-each: the whole demo script once the server runs, a picture during and after each step."""
    def ready() -> bool:
        status = deck.controller.status.state
        return len(deck.sampler.buffers) >= SCREENSHOT_MIN_SAMPLES and deck.controller.probed and status.is_running

    recorder = StepRecorder(deck.stage, folder, app, ready=ready, redraw=deck.dashboard.redraw_now,
                            grab=lambda: deck.window)
    recorder.start()
    deck.recorder = recorder  # keep it alive


def run_gui(args: argparse.Namespace) -> int:
    """Build the window, run the Qt event loop and return the exit code."""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per health check is noise
    if getattr(args, "scale", None):
        # Qt scales every widget, font and plot by this factor; it must be set before the application exists.
        os.environ["QT_SCALE_FACTOR"] = f"{args.scale:g}"
    existing = QApplication.instance()
    shots = args.screenshot or getattr(args, "screenshot_each", None)
    if shots and existing is None:
        # Headless, the picture is taken on a full-HD screen unless one is configured (Qt's own is 800x800).
        folder = Path(tempfile.mkdtemp(prefix="ollama-deck-screen-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        platform = screenshot_platform(os.environ, folder)
        if platform is not None:
            os.environ["QT_QPA_PLATFORM"] = platform
    app = existing if isinstance(existing, QApplication) else QApplication(sys.argv[:1])
    app.setApplicationName("ollama-deck")
    app.setDesktopFileName("ollama-deck")
    app.setWindowIcon(QIcon(str(app_icon_path())))
    apply_theme(app)
    try:
        deck = DeckApp(args)
    except ValueError as exc:
        print(f"ollama-deck: {exc}", file=sys.stderr)
        return 2
    deck.window.show_page(deck.first_page)
    deck.window.show()
    # The ~100k objects Qt, pyqtgraph and numpy leave at start-up never die; a full collection
    # that walks them all stalls the window ~50 ms (a fast stream triggers one every few seconds).
    gc.freeze()
    deck.start()
    if getattr(args, "presenter", False):
        deck.stage.set_presenting(True)
    if args.screenshot:
        _take_screenshot(deck, args.screenshot, app)
    elif getattr(args, "screenshot_each", None):
        _record_each_step(deck, Path(args.screenshot_each), app)
    app.aboutToQuit.connect(lambda: deck.current.close())  # the DeckApp in charge of the window by then
    return app.exec()
