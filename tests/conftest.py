"""Test-wide setup: Qt runs offscreen; fixtures live in tests/fakes/*_fixtures.py."""

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

pytest_plugins = [
    "tests.fakes.ollama_fixtures",
    "tests.fakes.server_fixtures",
    "tests.fakes.gpu_fixtures",
]
