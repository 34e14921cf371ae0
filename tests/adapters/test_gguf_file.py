"""The GGUF header reader on real GGUF files written by the gguf package, and on broken ones."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.adapters.gguf_file import GgufDamaged, GgufError, GgufNotFound, GgufTruncated, NotGguf, read_gguf
from app.core.memory.estimator import GpuMemory, LoadSettings, estimate
from app.core.units import GIB
from tests.fakes.llama_server.tiny_gguf import (N_CTX, N_EMBD, N_HEAD, N_HEAD_KV, N_LAYER, N_VOCAB,
                                                QWEN_STYLE_TEMPLATE, write_tiny_gguf)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_gguf(tmp_path_factory.mktemp("gguf") / "tiny.gguf")


def test_the_header_becomes_neutral_model_facts(tiny: Path) -> None:
    info = read_gguf(tiny)
    m = info.model_info
    assert m["general.architecture"] == "llama"
    assert (m["llama.block_count"], m["llama.embedding_length"], m["llama.attention.head_count"],
            m["llama.attention.head_count_kv"], m["llama.context_length"]) == (N_LAYER, N_EMBD, N_HEAD, N_HEAD_KV, N_CTX)
    assert m["tokenizer.ggml.tokens"] is None  # a long array is left out, as servers' metadata leaves it out
    assert m["general.parameter_count"] == sum(_elements(t["shape"]) for t in info.tensors)
    assert (info.architecture, info.quantization, info.parameter_count) == ("llama", "F32", m["general.parameter_count"])
    facts = info.facts()
    assert facts.metadata == m and facts.tensors == info.tensors and facts.quantization == "F32"
    assert facts.size_bytes == info.size_bytes and facts.source == str(tiny) and facts.training_context == N_CTX
    assert facts.architecture == "llama" and not facts.capabilities  # what it can do is the server's to say
    embd = next(t for t in info.tensors if t["name"] == "token_embd.weight")
    assert embd == {"name": "token_embd.weight", "type": "F32", "shape": [N_EMBD, N_VOCAB]}  # GGML order
    assert info.chat_template == QWEN_STYLE_TEMPLATE and info.size_bytes == tiny.stat().st_size
    assert info.modified_at.endswith("Z")


def test_the_estimator_prices_it_from_the_tensor_list(tiny: Path) -> None:
    info = read_gguf(tiny)
    shape = info.facts().shape()
    assert shape.weights.from_tensors and shape.n_vocab == N_VOCAB and not shape.tied_embeddings
    assert shape.key_length == N_EMBD // N_HEAD
    # Every weight byte is accounted to a layer, the input table or the output head.
    data_bytes = sum(_elements(t["shape"]) * 4 for t in info.tensors)
    assert shape.weights.total_file_weights == data_bytes
    est = estimate(shape, LoadSettings(num_ctx=1024, parallel=2), GpuMemory(total_bytes=24 * GIB))
    head_dim = N_EMBD // N_HEAD
    assert est.n_ctx_total == 2048 and est.kv_bytes == N_LAYER * 2048 * N_HEAD_KV * 2 * head_dim * 2  # f16
    assert est.verdict == "fits"


def _elements(shape: list[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def test_a_missing_file_and_a_folder_name_the_path(tmp_path: Path) -> None:
    with pytest.raises(GgufNotFound, match=str(tmp_path / "gone.gguf")):
        read_gguf(tmp_path / "gone.gguf")
    with pytest.raises(GgufError, match="is not a file"):
        read_gguf(tmp_path)


@pytest.mark.parametrize("content", [b"PK\x03\x04zip", b"<html>404</html>", b"\x00" * 100, b"GGU_" + b"\x00" * 64])
def test_a_file_that_is_not_gguf_says_so_with_its_first_bytes(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "model.gguf"
    path.write_bytes(content)
    with pytest.raises(NotGguf, match="is not a GGUF file") as caught:
        read_gguf(path)
    assert caught.value.path == path and str(path) in caught.value.message


def truncation_fails_cleanly(whole: bytes, cut: int, folder: Path) -> None:
    """Property: a GGUF file cut at `cut` bytes gives GgufTruncated naming the file, nothing else."""
    path = folder / f"cut-{cut}.gguf"
    path.write_bytes(whole[:cut])
    try:
        with pytest.raises(GgufTruncated) as caught:
            read_gguf(path)
        assert str(path) in caught.value.message and caught.value.hint
    finally:
        path.unlink()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_file_cut_anywhere_is_truncated_never_a_traceback(tiny: Path, tmp_path: Path, data: st.DataObject) -> None:
    whole = tiny.read_bytes()
    cut = data.draw(st.one_of(st.integers(0, 4096), st.integers(0, len(whole) - 1)))
    truncation_fails_cleanly(whole, cut, tmp_path)


@pytest.mark.engine
def test_the_header_scan_reads_what_the_gguf_library_reads(bundled_model) -> None:
    import gguf

    from app.adapters.gguf_file import MAX_ARRAY_ITEMS, read_gguf

    ours = read_gguf(bundled_model)
    reader = gguf.GGUFReader(bundled_model, "r")
    for key, field in reader.fields.items():
        if key.startswith("GGUF."):
            continue
        is_long_array = field.types[0] is gguf.GGUFValueType.ARRAY and len(field.data) > MAX_ARRAY_ITEMS
        expected = None if is_long_array else field.contents()
        assert ours.model_info[key] == expected, key
    assert [(t["name"], t["type"], t["shape"]) for t in ours.tensors] == \
        [(t.name, t.tensor_type.name, [int(d) for d in t.shape]) for t in reader.tensors]
    assert ours.model_info["general.parameter_count"] == sum(int(t.n_elements) for t in reader.tensors)


def nested_gguf(path: Path, depth: int) -> Path:
    """A GGUF header whose one metadata value is an array of an array of … `depth` deep (no writer makes one)."""
    import struct

    key = b"general.deep"
    data = b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", len(key)) + key + struct.pack("<I", 9)
    data += struct.pack("<IQ", 9, 1) * (depth - 1) + struct.pack("<IQ", 4, 1) + struct.pack("<I", 7)
    path.write_bytes(data)
    return path


def test_arrays_nested_absurdly_deep_are_a_damaged_file_with_the_reason(tmp_path: Path) -> None:
    with pytest.raises(GgufDamaged) as caught:
        read_gguf(nested_gguf(tmp_path / "deep.gguf", 500))
    assert str(tmp_path / "deep.gguf") in caught.value.message and "nests arrays more than" in caught.value.message
    assert read_gguf(nested_gguf(tmp_path / "two.gguf", 2)).model_info["general.deep"] == [[7]]


# Reads a GGUF file's header while another writer cuts the file to its first page (4 KiB, of a header three times
# longer): right after the reader maps the file or, reading it plainly, at its first read. Either way the reader must say the file is cut
# short, never die of SIGBUS on a mapped page past the new end.
CUT_WHILE_READING = r"""
import builtins, mmap, os, sys
from app.adapters.gguf_file import GgufError, read_gguf

path = sys.argv[1]
cut = []

def cut_once():
    if not cut:
        cut.append(True)
        os.truncate(path, 4096)

real_mmap, real_open = mmap.mmap, builtins.open

def mapping(*args, **kwargs):
    mapped = real_mmap(*args, **kwargs)
    cut_once()
    return mapped

class CutOnRead:
    def __init__(self, handle):
        self.handle = handle
    def read(self, *args):
        cut_once()
        return self.handle.read(*args)
    def __getattr__(self, name):
        return getattr(self.handle, name)
    def __enter__(self):
        return self
    def __exit__(self, *exc):
        return self.handle.__exit__(*exc)

def opening(file, mode="r", *args, **kwargs):
    handle = real_open(file, mode, *args, **kwargs)
    return CutOnRead(handle) if str(file) == path and "b" in mode else handle

mmap.mmap, builtins.open = mapping, opening
try:
    read_gguf(path)
except GgufError as exc:
    print(type(exc).__name__, exc.message)
"""


def test_a_file_cut_while_its_header_is_read_is_reported_not_a_sigbus(tmp_path: Path) -> None:
    import subprocess
    import sys

    victim = write_tiny_gguf(tmp_path / "being-rewritten.gguf", chat_template="{{ messages }}" * 1000)
    done = subprocess.run([sys.executable, "-c", CUT_WHILE_READING, str(victim)], capture_output=True, text=True,
                          timeout=60, cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, f"the reader died (status {done.returncode}): {done.stderr[-2000:]}"
    assert done.stdout.startswith("GgufTruncated") and str(victim) in done.stdout
    assert victim.stat().st_size == 4096  # it was really cut while being read
