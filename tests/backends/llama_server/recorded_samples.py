"""ServerSamples made from the recorded answers of the real llama-server, and a spec that reports them.

The spec stands for LLAMA_SERVER (app/backends/llama_server/spec.py) where a test needs only its
telemetry capabilities: Ollama's seams with slots, metrics and the real llama-server reader."""

from __future__ import annotations

import dataclasses
import json

from app.backends.llama_server.metrics import parse_metrics, parse_slots, reading_from, server_telemetry
from app.backends.ollama.spec import OLLAMA
from app.core.ports.backend import BackendSpec, Capabilities
from app.core.server_telemetry import RateTracker, ServerSample
from tests.backends.llama_server.metrics_property import recorded

REPORTING_SPEC: BackendSpec = dataclasses.replace(
    OLLAMA, name="llama_server", display_name="llama-server",
    capabilities=Capabilities(reports_slots=True, server_metrics=True), server_telemetry=server_telemetry)


def recorded_samples(start_s: float = 0.0, step_s: float = 1.0) -> list[ServerSample]:
    """Idle, two slots busy with one request waiting, and idle again after 144 tokens: three samples."""
    tracker = RateTracker()
    samples = []
    for i, phase in enumerate(("idle", "busy", "after")):
        slots, _ = parse_slots(json.loads(recorded(f"slots_{phase}.json")))
        reading = reading_from(parse_metrics(recorded(f"metrics_{phase}.txt")), slots, at=start_s + i * step_s)
        samples.append(tracker.sample(reading))
    return samples
