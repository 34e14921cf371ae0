"""A GGUF model file's header read into the metadata a server's show reply carries.

llama-server serves GGUF files and Ollama stores its models as GGUF blobs: the memory estimator
(app/core/model_shape.py) reads the same keys from either. The file is memory-mapped and only the
key/value header and the tensor infos are read (long arrays skipped, not decoded: see _Header); the
weights stay on disk, never touched. The gguf package gives the tensor and file types and block sizes. What comes back has the shape of Ollama's verbose
`/api/show`: `model_info` (GGUF keys, long arrays left out as Ollama leaves them out, plus
`general.parameter_count` summed from the tensors as Ollama does), `details` (format, family,
parameter size, quantization) and `tensors` ([{name, type, shape}], shapes in GGML order).

Failures are one typed error each, naming the file: missing, not GGUF, cut short. The gguf
package raises bare ValueError / IndexError / struct errors from deep inside numpy; they never
leave this module.
"""

from __future__ import annotations

import math
import mmap
import os
import struct
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from app.core.errors import DeckError

GGUF_MAGIC = b"GGUF"
# Arrays longer than this (token lists, merges, scores) are left out, as Ollama's show does
# without verbose: they cost megabytes and the estimator takes the vocabulary from token_embd.
MAX_ARRAY_ITEMS = 64


class GgufError(DeckError):
    """A GGUF file could not be read; `path` is the file."""

    hint = "Pick a GGUF model file (the .gguf files llama.cpp and Hugging Face publish)."

    def __init__(self, message: str, path: Path, hint: str | None = None) -> None:
        super().__init__(message, hint)
        self.path = path


class GgufNotFound(GgufError):
    """The file does not exist."""

    hint = "Check the path; the file may have been moved or deleted."


class NotGguf(GgufError):
    """The file exists but is not GGUF (wrong magic bytes)."""

    hint = "This is not a GGUF model; pick a .gguf file (llama.cpp converts other formats with convert_hf_to_gguf.py)."


class GgufTruncated(GgufError):
    """The file starts like GGUF but ends before its header or tensor data is complete."""

    hint = "The file is cut short or damaged (an interrupted download?); download or copy it again."


@dataclass(frozen=True)
class GgufFile:
    """What a GGUF header says about one model file; sizes in bytes, mtime as ISO 8601 UTC."""

    path: Path
    size_bytes: int
    modified_at: str
    model_info: dict[str, Any]
    details: dict[str, Any]
    tensors: tuple[dict[str, Any], ...]
    chat_template: str

    def show_dict(self) -> dict[str, Any]:
        """The metadata in the show reply's shape (what shape_from_show and fit_verdict take)."""
        return {"model_info": self.model_info, "details": self.details, "parameters": "",
                "tensors": list(self.tensors)}


def file_stat(path: Path) -> tuple[int, str]:
    """(size in bytes, mtime as ISO 8601 UTC) of a file; GgufError subclasses on failure."""
    try:
        st = path.stat()
    except FileNotFoundError:
        raise GgufNotFound(f"GGUF file {path} does not exist", path) from None
    except OSError as exc:
        raise GgufError(f"GGUF file {path} cannot be read: {exc.strerror or exc}", path) from None
    if not path.is_file():
        raise GgufError(f"{path} is not a file", path, hint="Pick a .gguf file, not a folder.")
    when = datetime.fromtimestamp(st.st_mtime, tz=UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    return st.st_size, when


def _check_magic(path: Path, size: int) -> None:
    try:
        with path.open("rb") as handle:
            head = handle.read(len(GGUF_MAGIC))
    except OSError as exc:
        raise GgufError(f"GGUF file {path} cannot be read: {exc.strerror or exc}", path) from None
    if head == GGUF_MAGIC:
        return
    if size < len(GGUF_MAGIC) and GGUF_MAGIC.startswith(head):
        raise GgufTruncated(f"{path} ends after {size} bytes, before its GGUF header", path)
    raise NotGguf(f"{path} is not a GGUF file (it starts with {head!r}, not b'GGUF')", path)


def _plain(value: Any) -> Any:
    """A field's value as JSON-like Python (numpy scalars to int/float/bool, bytes to text)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, list):
        return [_plain(v) for v in value]
    item = getattr(value, "item", None)
    return item() if callable(item) else value


def _quantization(file_type: Any) -> str:
    import gguf  # imported here: the package costs a numpy import the GUI's start need not pay

    if not isinstance(file_type, int):
        return ""
    try:
        name = gguf.LlamaFileType(file_type).name
    except ValueError:
        return ""
    return name.removeprefix("MOSTLY_").removeprefix("ALL_")


def size_label(n: int) -> str:
    """A parameter count as Ollama writes it: 134515008 -> "134.5M"."""
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f}{unit}"
    return str(n)


# GGUF value types (gguf.GGUFValueType) with fixed sizes: their struct formats, little-endian.
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
DEFAULT_ALIGNMENT = 32  # bytes, when general.alignment does not say


class _Header:
    """A cursor over a GGUF file's bytes (memory-mapped) that reads the key/value header and the tensor
    infos the way the format lays them out, skipping long arrays without decoding them.

    gguf.GGUFReader decodes every array item into numpy views, about two seconds of CPU for a
    vocabulary of 49k tokens (more for larger ones) — time taken from a server decoding on the same
    cores. Its constants (value, tensor and file types, block sizes) are still the library's."""

    def __init__(self, data: memoryview) -> None:
        self.data = data
        self.at = 0

    def take(self, fmt: str) -> Any:
        value = struct.unpack_from(fmt, self.data, self.at)[0]
        self.at += struct.calcsize(fmt)
        return value

    def string(self) -> bytes:
        length = self.take("<Q")
        if self.at + length > len(self.data):
            raise ValueError("a string runs past the end of the file")
        text = bytes(self.data[self.at:self.at + length])
        self.at += length
        return text

    def skip_string(self) -> None:
        length = self.take("<Q")
        self.at += length
        if self.at > len(self.data):
            raise ValueError("a string runs past the end of the file")

    def value(self, kind: int) -> Any:
        if kind == _STRING:
            return self.string().decode("utf-8", errors="replace")
        if kind == _ARRAY:
            item_kind, count = self.take("<I"), self.take("<Q")
            if count > MAX_ARRAY_ITEMS:
                self.skip_array(item_kind, count)
                return None
            return [self.value(item_kind) for _ in range(count)]
        return self.take(_SCALARS[kind])  # KeyError for a type GGUF does not have: a damaged file

    def skip_array(self, kind: int, count: int) -> None:
        if kind == _STRING:
            for _ in range(count):
                self.skip_string()
        elif kind == _ARRAY:
            for _ in range(count):
                self.value(_ARRAY)
        else:
            self.at += struct.calcsize(_SCALARS[kind]) * count
            if self.at > len(self.data):
                raise ValueError("an array runs past the end of the file")


def _parse(path: Path) -> tuple[dict[str, Any], tuple[dict[str, Any], ...]]:
    import gguf  # the tensor types and their block sizes

    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        view = memoryview(mapped)
        try:
            header = _Header(view)
            header.at = len(GGUF_MAGIC)
            version = header.take("<I")
            if version < 2:
                raise ValueError(f"GGUF version {version} is older than this reader takes")
            n_tensors, n_kv = header.take("<Q"), header.take("<Q")
            info: dict[str, Any] = {}
            for _ in range(n_kv):
                key = header.string().decode("utf-8", errors="replace")
                info[key] = header.value(header.take("<I"))
            infos = []
            for _ in range(n_tensors):
                name = header.string().decode("utf-8", errors="replace")
                dims = [header.take("<Q") for _ in range(header.take("<I"))]
                kind, offset = header.take("<I"), header.take("<Q")
                infos.append((name, dims, gguf.GGMLQuantizationType(kind), offset))
            alignment = info.get("general.alignment")
            alignment = alignment if isinstance(alignment, int) and alignment > 0 else DEFAULT_ALIGNMENT
            start = -(-header.at // alignment) * alignment  # the tensor data begins at the next multiple
            size = len(view)
        finally:
            view.release()
    tensors = tuple({"name": name, "type": kind.name, "shape": dims} for name, dims, kind, _ in infos)
    counts = [math.prod(dims) for _, dims, _, _ in infos]
    info["general.parameter_count"] = sum(counts)
    end = 0
    for (_, _, kind, offset), n in zip(infos, counts):
        block, type_bytes = gguf.GGML_QUANT_SIZES[kind]
        end = max(end, start + offset + n // block * type_bytes)
    if end > size:
        raise ValueError(f"tensor data ends at byte {end}")
    return info, tensors


def read_gguf(path: str | os.PathLike[str]) -> GgufFile:
    """Read a GGUF file's header and tensor infos (not its weights); GgufError subclasses name the file."""
    path = Path(path)
    size, modified = file_stat(path)
    _check_magic(path, size)
    try:
        info, tensors = _parse(path)
    except (ValueError, IndexError, struct.error, OverflowError, KeyError, UnicodeDecodeError) as exc:
        # The magic was right, so the header or tensor table ran past the end or is garbled.
        raise GgufTruncated(f"{path} ({size} bytes) is cut short or damaged: its GGUF header or tensor data "
                            f"does not fit in the file ({type(exc).__name__})", path) from None
    except OSError as exc:
        raise GgufError(f"GGUF file {path} cannot be read: {exc.strerror or exc}", path) from None
    arch = info.get("general.architecture")
    quant = _quantization(info.get("general.file_type"))
    details = {"format": "gguf", "family": arch if isinstance(arch, str) else "",
               "families": [arch] if isinstance(arch, str) else [],
               "parameter_size": size_label(info["general.parameter_count"]),
               "quantization_level": quant}
    template = info.get("tokenizer.chat_template")
    return GgufFile(path=path, size_bytes=size, modified_at=modified, model_info=info, details=details,
                    tensors=tensors, chat_template=template if isinstance(template, str) else "")


__all__ = ["GgufError", "GgufFile", "GgufNotFound", "GgufTruncated", "NotGguf", "file_stat", "read_gguf", "size_label"]
