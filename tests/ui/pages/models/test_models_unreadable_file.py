"""A models folder with one damaged GGUF among good ones (llama-server's catalog, a replayed server on a real
socket): the damaged file is reported with its reason, and the files after it still get their details."""

from __future__ import annotations

import contextlib
import struct
from pathlib import Path

from app.adapters.aio import LoopThread
from app.backends.llama_server.client import LlamaServerClient
from app.ui.pages.models.session import ModelsSession
from tests.fakes.llama_server.replay import Replay, replaying
from tests.fakes.llama_server.tiny_gguf import write_tiny_gguf

WAIT_MS = 30_000


def _deeply_nested(path: Path, depth: int = 500) -> None:
    key = b"general.deep"
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", len(key)) + key
                     + struct.pack("<I", 9) + struct.pack("<IQ", 9, 1) * (depth - 1) + struct.pack("<IQ", 4, 1)
                     + struct.pack("<I", 7))


def test_a_damaged_file_is_reported_and_the_later_files_still_load(qtbot, tmp_path):
    folder = tmp_path / "models"
    folder.mkdir()
    write_tiny_gguf(folder / "a-good.gguf")
    _deeply_nested(folder / "b-nested.gguf")
    write_tiny_gguf(folder / "c-good.gguf")
    loop = LoopThread(name="test-models-unreadable")
    stack = contextlib.AsyncExitStack()
    url = loop.submit(stack.enter_async_context(replaying(Replay()))).result(10)
    session = ModelsSession(loop, lambda base_url: LlamaServerClient(base_url, models_dir=folder),
                            pull_hint=lambda _model, text: text)
    loaded: list[str] = []
    failed: dict[str, str] = {}
    session.details_loaded.connect(lambda name, _details: loaded.append(name))
    session.details_failed.connect(lambda name, text: failed.update({name: text}))
    try:
        session.refresh(url)
        qtbot.waitUntil(lambda: "c-good.gguf" in loaded, timeout=WAIT_MS)
    finally:
        session.shutdown()
        loop.submit(stack.aclose()).result(10)
        loop.stop()
    assert "a-good.gguf" in loaded and "b-nested.gguf" not in loaded
    assert list(failed) == ["b-nested.gguf"]
    assert "b-nested.gguf is damaged" in failed["b-nested.gguf"] and "nests arrays" in failed["b-nested.gguf"]
