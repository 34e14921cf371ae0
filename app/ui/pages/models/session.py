"""View-model of the Models page: model-store work on the loop thread, results as Qt signals."""

from __future__ import annotations

import concurrent.futures
import time
from typing import Any
from collections.abc import Callable, Coroutine

from PySide6.QtCore import QObject, Signal

from app.core.ports.tasks import CoroutineRunner
from app.services.client_pool import ClientPool
from app.core.errors import DeckError
from app.core.memory.estimator import GpuMemory
from app.core.memory.launch_plan import SettingsPlanner
from app.core.memory.model_fit import FitVerdict, fit_verdict
from app.core.model_facts import ModelFacts
from app.core.ports.catalog import CatalogFactory
from app.core.ports.planner import LoadPlanner
from app.core.pull_progress import PullTracker
from app.core.server.settings import ServerSettings

PULL_EMIT_INTERVAL_S = 0.1  # progress lines can come hundreds a second; the bar needs ten


class ModelsSession(QObject):
    """Schedules tags/ps/show, pull, create, delete, load and unload; reports through signals."""

    models_loaded = Signal(str, list, list)  # url, list[LocalModel], list[RunningModel]
    models_failed = Signal(str, str)  # url, message
    details_loaded = Signal(str, object)  # model, ModelDetails
    details_failed = Signal(str, str)  # model, why its details cannot be read (the others are still read)
    verdicts_ready = Signal(dict)  # model -> FitVerdict
    pull_progress = Signal(str, object)  # model, PullSnapshot
    pull_finished = Signal(str)
    pull_failed = Signal(str, str)  # model, message with what to do
    create_status = Signal(str)
    create_finished = Signal(str)
    create_failed = Signal(str, str)
    action_finished = Signal(str, str)  # kind (delete/unload/preload), model
    action_failed = Signal(str, str, str)  # kind, model, message

    def __init__(self, loop: CoroutineRunner, client_factory: CatalogFactory, pull_hint: Callable[[str, str], str],
                 context_setting: str = "the context setting", parent: QObject | None = None, *,
                 planner: LoadPlanner | None = None) -> None:
        super().__init__(parent)
        self._loop = loop
        self._clients = ClientPool(client_factory)
        self._pull_hint = pull_hint  # the backend's words for what to do after a failed pull
        self._context_setting = context_setting  # what the server calls the context setting
        self._planner: LoadPlanner = planner if planner is not None else SettingsPlanner()  # the server's launch
        self._closed = False
        self.pull_future: concurrent.futures.Future[None] | None = None
        self.create_future: concurrent.futures.Future[None] | None = None

    def _submit(self, coro: Coroutine[Any, Any, None]) -> concurrent.futures.Future[None]:
        return self._loop.submit_unless(self._closed, coro)

    def refresh(self, url: str, known_digests: frozenset[str] = frozenset()) -> concurrent.futures.Future[None]:
        """Read local and loaded models, then the metadata of each model not known yet (by digest)."""

        async def work() -> None:
            client = self._clients.get(url)
            try:
                local = await client.tags()
                running = await client.ps()
            except DeckError as exc:
                self.models_failed.emit(url, exc.user_text())
                return
            self.models_loaded.emit(url, local, running)
            for model in local:
                if model.digest and model.digest in known_digests:
                    continue
                try:
                    self.details_loaded.emit(model.name, await client.show(model.name))
                except DeckError as exc:  # one unreadable file (damaged, cut short) costs only its own row
                    self.details_failed.emit(model.name, exc.user_text())

        return self._submit(work())

    def compute_verdicts(self, entries: dict[str, tuple[ModelFacts, int]], settings: ServerSettings,
                         version: str | None, gpu: GpuMemory | None,
                         gpu_reason: str) -> concurrent.futures.Future[None]:
        """Price every model (name -> (facts, size on disk)) on `gpu` (None: unknown, `gpu_reason` says why)
        off the GUI thread."""

        async def work() -> None:
            verdicts: dict[str, FitVerdict] = {}
            for name, (facts, size) in entries.items():
                verdicts[name] = fit_verdict(facts, size, settings, version, gpu, gpu_reason,
                                             planner=self._planner, context_setting=self._context_setting)
            self.verdicts_ready.emit(verdicts)

        return self._submit(work())

    def running(self, url: str) -> concurrent.futures.Future[None]:
        """Read the loaded models again (after a load or unload)."""

        async def work() -> None:
            client = self._clients.get(url)
            try:
                local, running = await client.tags(), await client.ps()
            except DeckError as exc:
                self.models_failed.emit(url, exc.user_text())
                return
            self.models_loaded.emit(url, local, running)

        return self._submit(work())

    def pull(self, url: str, model: str) -> concurrent.futures.Future[None]:
        """Pull a model, reporting progress about ten times a second; cancel the future to stop."""

        async def work() -> None:
            tracker = PullTracker(time.monotonic())
            last_emit, last_status = 0.0, ""
            try:
                async for line in self._clients.get(url).pull(model):
                    now = time.monotonic()
                    snapshot = tracker.update(line.status, line.digest, line.total, line.completed, now)
                    if now - last_emit >= PULL_EMIT_INTERVAL_S or line.status != last_status:
                        self.pull_progress.emit(model, snapshot)
                        last_emit, last_status = now, line.status
            except DeckError as exc:
                hint = exc.hint if "registry" in exc.hint else self._pull_hint(model, exc.message)
                self.pull_failed.emit(model, f"{exc.message} — {hint}")
                return
            self.pull_progress.emit(model, tracker.snapshot())
            self.pull_finished.emit(model)

        self.pull_future = self._submit(work())
        return self.pull_future

    def cancel_pull(self) -> None:
        """Stop the pull now (Ollama keeps the layers downloaded so far)."""
        if self.pull_future is not None:
            self.pull_future.cancel()

    def create(self, url: str, body: dict[str, Any]) -> concurrent.futures.Future[None]:
        """Create a variant from a checked body (model, from, parameters, quantize)."""
        name = body["model"]

        async def work() -> None:
            try:
                async for status in self._clients.get(url).create(
                        name, body["from"], parameters=body.get("parameters"), quantize=body.get("quantize")):
                    self.create_status.emit(status)
            except DeckError as exc:
                self.create_failed.emit(name, exc.user_text())
                return
            self.create_finished.emit(name)

        self.create_future = self._submit(work())
        return self.create_future

    def act(self, url: str, kind: str, model: str) -> concurrent.futures.Future[None]:
        """delete, unload (keep_alive 0) or preload one model."""

        async def work() -> None:
            client = self._clients.get(url)
            try:
                if kind == "delete":
                    await client.delete(model)
                elif kind == "unload":
                    await client.unload(model)
                else:
                    await client.load(model)
            except DeckError as exc:
                self.action_failed.emit(kind, model, exc.user_text())
                return
            self.action_finished.emit(kind, model)

        return self._submit(work())

    def shutdown(self, timeout_s: float = 5.0) -> None:
        """Cancel a pull and close connections (blocking; call on quit)."""
        self.cancel_pull()
        self._closed = True
        try:
            self._loop.run(self._clients.aclose(), timeout=timeout_s)
        except Exception:  # noqa: BLE001 - quitting goes on whatever the connections do
            pass


__all__ = ["ModelsSession"]
