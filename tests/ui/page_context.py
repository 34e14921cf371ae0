"""The pages' context for tests and measurement scripts, made as the composition root makes it."""

from __future__ import annotations

from typing import Any

from app.adapters.aio import LoopThread
from app.adapters.storage.atomic_json import write_atomic
from app.adapters.storage.saved_format import SAVED_FORMAT
from app.adapters.telemetry.nvml import NullGpuBackend
from app.backends import registry
from app.backends.ollama.spec import OLLAMA
from app.core.ports.backend import BackendSpec
from app.core.server.settings import ServerSettings
from app.core.telemetry import GpuBackend
from app.ui.pages.context import PageContext
from app.ui.server.controller import ServerController


def page_context_on(loop: LoopThread, *, backend: BackendSpec = OLLAMA, server: ServerController | None = None,
                    gpu: GpuBackend | None = None, **fields: Any) -> PageContext:
    """A PageContext over the given parts (keyword arguments as PageContext's); where no server view-model is
    given, one without a supervisor (its settings the defaults) on `loop` (shut it down with `context.server.shutdown()`); where no GPU
    is given, none (NVML's null backend)."""
    if server is None:
        server = ServerController(loop, None, backend.catalog, lambda _settings: None,
                                  last_good=ServerSettings(backend=backend.name))
    return PageContext(backend=backend, server=server, loop=loop,
                       gpu=gpu if gpu is not None else NullGpuBackend("no NVIDIA driver"),
                       write_file=write_atomic, **{**run_documents(), **fields})


def run_documents() -> dict[str, Any]:
    """What the pages showing runs get from the composition root: the server labels and the saved format."""
    return {"server_labels": registry.display_names(), "saved_format": SAVED_FORMAT}
