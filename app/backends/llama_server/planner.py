"""llama-server's load planner: it launches with the settings as given (see tuning.arguments: -c is the
context per slot × -np, the batches only when set), takes the model's training context shared by the
slots when no context is set, and its --fit places the layers."""

from __future__ import annotations

from app.core.memory.launch_plan import SettingsPlanner

# "C": the label the estimate command's JSON ("era") has always given a llama-server build.
LLAMA_SERVER_PLANNER = SettingsPlanner(server_name="llama-server", label="C",
                                       description="llama-server --fit places the layers")

__all__ = ["LLAMA_SERVER_PLANNER"]
