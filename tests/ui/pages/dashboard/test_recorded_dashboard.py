"""The README's H200 dashboard image stays reproducible: the recording renders through the app's page."""

import json
import os
import subprocess
import sys
from pathlib import Path

from PySide6.QtGui import QImage

ROOT = Path(__file__).resolve().parents[4]
RECORDING = ROOT / "benchmarks/telemetry/h200_llama_server_recording.json"


def test_recording_is_real_sampler_rows_with_a_gpu():
    rec = json.loads(RECORDING.read_text())
    assert rec["gpu"]["name"] == "NVIDIA H200" and len(rec["t"]) == len(rec["rows"]) > 100
    server = rec["channels"].index("gpu_mem_server_mib")
    assert max(r[server] for r in rec["rows"] if r[server] is not None) > 10_000


def test_render_script_draws_the_dashboard_from_the_recording(tmp_path):
    out = tmp_path / "dash.png"
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks/telemetry/render.py"), str(RECORDING), str(out), "--until", "64"],
        env=dict(os.environ, QT_QPA_PLATFORM="offscreen"), capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    image = QImage(str(out))
    assert (image.width(), image.height()) == (1440, 900)
