"""llama-server's load planner: it launches with the settings as given (see tuning.arguments: -c is the
context per slot × -np, the batches only when set, -ngl from the GPU-layers option). Without -c each slot
gets the model's training context — llama.cpp's --fit (on by default) sizes the cache for the training
context in every slot when the cache is not unified, as an explicit -np makes it — and --fit cuts that
context where the GPU cannot hold it. `-ngl all` (the option's -1) keeps every layer on the GPU: --fit then
cuts an unset context but moves no layers."""

from __future__ import annotations

from app.backends.llama_server.tuning import n_gpu_layers
from app.core.memory.launch_plan import SettingsPlanner

# "C": the label the estimate command's JSON ("era") has always given a llama-server build.
LLAMA_SERVER_PLANNER = SettingsPlanner(server_name="llama-server", label="C",
                                       description="llama-server: the layers -ngl gives, the context --fit leaves",
                                       gpu_layers=n_gpu_layers)  # -ngl: a negative count is `all`

__all__ = ["LLAMA_SERVER_PLANNER"]
