"""The load planner port: what a backend's server will really launch for a model, to be priced.

A server may decide knobs by itself before it loads a model (a default context by GPU memory, an
automatic batch, one slot for some architectures, its own layer placement by version). Each
backend's spec carries a LoadPlanner that knows its server's rules; pricing, pages and services ask
it and never branch on the backend's name.
"""

from __future__ import annotations

from typing import Protocol

from app.core.memory.estimator import GpuMemory, LoadRules
from app.core.memory.launch_plan import LaunchPlan
from app.core.model_shape import ModelShape
from app.core.server.settings import ServerSettings


class LoadPlanner(Protocol):
    """Settings + a model's facts (its shape and size on disk, bytes) + the GPU -> the launch."""

    def rules(self, server_version: str | None = None) -> LoadRules:
        """How this server (at `server_version`; None: the current one) places layers; raises
        EstimateError for a version it cannot read."""
        ...

    def plan(self, settings: ServerSettings, shape: ModelShape, size_bytes: int | None = None,
             gpu: GpuMemory | None = None, *, server_version: str | None = None, model_num_ctx: int | None = None,
             model_num_batch: int | None = None, model_num_gpu: int | None = None,
             context_setting: str = "the context setting") -> LaunchPlan:
        """The launch for these settings (`gpu` None: no GPU; `size_bytes` None: the shape's file size;
        the model's (or the request's) own num_ctx/num_batch/num_gpu where it sets them; `context_setting`:
        what the words call the context setting). Raises EstimateError for a version it cannot read."""
        ...


__all__ = ["LoadPlanner"]
