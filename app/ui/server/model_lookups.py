"""View-model of the model lookups other pages share: the local model list and a model's shape."""

from __future__ import annotations

import concurrent.futures

from PySide6.QtCore import QObject, Signal

from app.core.errors import DeckError
from app.core.models import LocalModel
from app.core.ports.catalog import CatalogFactory
from app.ui.server.loop_gate import LoopGate


class ModelLookups(QObject):
    """Reads the server's models on the loop thread for the Server, Prompt and Benchmark pages."""

    models_listed = Signal(list)  # list[LocalModel]
    model_shape_ready = Signal(str, object, str)  # name, ModelShape | None, error text
    # name, the model's own num_ctx and num_batch (None where it sets none): sent just before its shape
    model_params_ready = Signal(str, object, object)

    def __init__(self, gate: LoopGate, catalog: CatalogFactory, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._gate = gate
        self._catalog = catalog

    def publish_models(self, models: list[LocalModel]) -> None:
        """Pass a model list read elsewhere (the Models page) to every page that shows one."""
        self.models_listed.emit(list(models))

    def list_models(self) -> concurrent.futures.Future[None]:
        """Read the local models; the result arrives as models_listed."""

        async def work() -> None:
            async with self._catalog(self._gate.server.settings.base_url) as client:
                self.models_listed.emit(await client.tags())

        return self._gate.submit(work())

    def fetch_model_shape(self, name: str) -> concurrent.futures.Future[None]:
        """Read a model's metadata (verbose, with its size on disk); arrives as model_shape_ready."""

        async def work() -> None:
            try:
                async with self._catalog(self._gate.server.settings.base_url) as client:
                    details = await client.show(name, verbose=True)
                    sizes = {m.name: m.size_bytes for m in await client.tags()}
                shape = details.facts.shape(sizes.get(name, 0))
            except DeckError as exc:
                self.model_shape_ready.emit(name, None, f"Cannot price {name}: {exc.user_text()}")
            else:
                self.model_params_ready.emit(name, details.facts.own_context, details.facts.own_batch)
                self.model_shape_ready.emit(name, shape, "")

        return self._gate.submit(work())


__all__ = ["ModelLookups"]
