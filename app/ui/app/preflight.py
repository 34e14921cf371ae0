"""The pre-flight's composition root: `ollama-deck --preflight [--demo|--url|--backend] [--script]` picks the server
the talk would use (the embedded engine with --demo, else the chosen backend at the saved or given address), the
probes (a port bound on 127.0.0.1, NVML, Qt's fonts and screen), runs the checks of app/services/preflight.py and
prints one line per check; `preflight_dialog` wires the same checks to the window's dialog.

Fonts and the screen need a QGuiApplication: the real platform where a display is set (DISPLAY or
WAYLAND_DISPLAY, or QT_QPA_PLATFORM names one), else the offscreen one; the first line says which.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QWidget

from app.adapters.demo_script import load_script
from app.adapters.process.procs import loopback_port_holder
from app.adapters.storage import paths as storage_paths
from app.adapters.storage.preset_store import PresetStore
from app.adapters.storage.settings_store import SettingsStore
from app.adapters.telemetry.nvml import make_gpu_backend
from app.backends import registry
from app.core.console.presets import Preset
from app.core.demo.preflight import Check, exit_code, summary
from app.core.demo.script import DemoScript, ScriptError
from app.core.ports.backend import BackendSpec
from app.core.server.settings import ServerSettings
from app.core.server.state import ServerStatus
from app.core.server.url import settings_for_url
from app.core.telemetry import GpuBackend
from app.services.preflight import EngineFacts, PreflightProbes, PreflightTarget, run_checks
from app.ui.app import embedded
from app.ui.presenter.preflight import PreflightDialog, font_coverage, screen_facts

if TYPE_CHECKING:
    from app.ui.app.main import DeckApp

EMBEDDED_LABEL = "llama-server (embedded)"


def engine_facts() -> EngineFacts:
    """The embedded engine's install, as the pre-flight reads it."""
    status = embedded.engine_status()
    return EngineFacts(ready=status.ready, server=str(status.server or ""), model=str(status.model or ""),
                       problems=status.problems, commands=status.commands)


def _ignore_status(_status: ServerStatus) -> None:
    pass


def _ignore_line(_line: str) -> None:
    pass


def _presets(config_dir: Path | None) -> list[Preset]:
    return PresetStore(config_dir).load().presets  # read only; the built-ins when there is no file


def preflight_target(args: argparse.Namespace) -> PreflightTarget:
    """The server --demo, --backend and --url name, with a server control of its own (nothing started yet)."""
    config_dir = Path(args.config_dir) if getattr(args, "config_dir", None) else None
    engine: EngineFacts | None = None
    settings: ServerSettings
    if getattr(args, "demo", False):
        spec = registry.get(embedded.BACKEND)
        engine = engine_facts()
        settings = embedded.embedded_settings()  # a port free now, as --demo picks it
        label = EMBEDDED_LABEL
    else:
        spec = registry.get(getattr(args, "backend", None) or registry.DEFAULT_BACKEND)
        # Only read: a damaged file stays where it is for the window to report.
        settings = SettingsStore(config_dir, spec.tuning).load(change_nothing=True).settings
        if getattr(args, "url", None):
            settings = settings_for_url(settings, args.url)
        label = spec.display_name
    backend: BackendSpec = spec.bound(lambda: settings)
    server = backend.server(settings, on_status=_ignore_status, on_log=_ignore_line,
                            runtime_dir=storage_paths.runtime_dir(getattr(args, "config_dir", None) or None))
    return PreflightTarget(backend, server, label, engine)


def preflight_dialog(deck: DeckApp, script: DemoScript | None = None, parent: QWidget | None = None) -> PreflightDialog:
    """The dialog for the window's button: the checks against the window's own server (its supervisor, so a
    server it runs is seen as its own) and GPU."""
    supervisor = deck.controller.supervisor
    if supervisor is None:
        raise ValueError("the window has no server control yet")
    label = EMBEDDED_LABEL if deck.demo else deck.backend.display_name
    target = PreflightTarget(deck.backend, supervisor, label, engine_facts() if deck.demo else None)
    config_dir = deck.store.config_dir
    probes = PreflightProbes(port_holder=loopback_port_holder, gpu=deck.gpu, presets=_presets(config_dir))
    return PreflightDialog(script or load_script("builtin"), target, probes, deck.loop, parent or deck.window)


def _platform_line() -> str:
    """Pick Qt's platform before the application exists: the real one where a display is set, else offscreen."""
    chosen = os.environ.get("QT_QPA_PLATFORM", "").strip()
    display = os.environ.get("WAYLAND_DISPLAY") or os.environ.get("DISPLAY")
    if not chosen and not display:
        os.environ["QT_QPA_PLATFORM"] = "offscreen"
        return "offscreen (no DISPLAY: the fonts are this machine's, the screen is not a real one)"
    return ""


def _gui_application() -> tuple[QGuiApplication, str]:
    note = _platform_line()
    existing = QGuiApplication.instance()
    app = existing if isinstance(existing, QGuiApplication) else QGuiApplication(sys.argv[:1])
    platform = QGuiApplication.platformName()
    if note:
        return app, note
    where = os.environ.get("WAYLAND_DISPLAY") or os.environ.get("DISPLAY") or "the configured one"
    return app, f"{platform} (the real screen, {where})" if platform not in ("offscreen", "minimal") else platform


def _script(args: argparse.Namespace) -> DemoScript:
    script = getattr(args, "script", None)
    if isinstance(script, DemoScript):
        return script
    return load_script(script if isinstance(script, str) else "builtin")


async def _run(script: DemoScript, target: PreflightTarget, probes: PreflightProbes,
               max_tokens: int | None) -> list[Check]:
    try:
        return await run_checks(script, target, probes, max_tokens=max_tokens)
    finally:
        if not target.server.status.orphan:  # one an earlier run left behind stays as it was
            await target.server.close()  # releases watchers; stops only a server this run started


def run_preflight(args: argparse.Namespace, max_tokens: int | None = None) -> int:
    """Print each check's line and a summary; 0 when nothing failed (warnings allowed), 1 otherwise, 2 when the
    script cannot be read."""
    if getattr(args, "scale", None):
        os.environ["QT_SCALE_FACTOR"] = f"{args.scale:g}"  # before the application exists
    try:
        script = _script(args)
    except ScriptError as exc:
        print(f"ollama-deck: {exc}", file=sys.stderr)
        return 2
    _app, platform = _gui_application()
    target = preflight_target(args)
    config_dir = Path(args.config_dir) if getattr(args, "config_dir", None) else None
    gpu: GpuBackend = make_gpu_backend()
    probes = PreflightProbes(port_holder=loopback_port_holder, gpu=gpu, fonts=font_coverage, screen=screen_facts,
                             presets=_presets(config_dir))
    where = script.source or "the script"
    print(f"Pre-flight of “{script.title}” ({where}, {len(script)} steps, {script.minutes:g} min) on {target.label}; "
          f"Qt platform: {platform}", flush=True)
    try:
        checks = asyncio.run(_run(script, target, probes, max_tokens))
    finally:
        gpu.close()
    for check in checks:
        print(check.line())
    print(summary(checks), flush=True)
    return exit_code(checks)


__all__ = ["EMBEDDED_LABEL", "engine_facts", "preflight_dialog", "preflight_target", "run_preflight"]
