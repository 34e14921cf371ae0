"""A GGUF model file's header read into the metadata a server's show reply carries.

llama-server serves GGUF files and Ollama stores its models as GGUF blobs: the memory estimator
(app/core/model_shape.py) reads the same keys from either. `gguf.GGUFReader` memory-maps the file
and parses only the key/value header and the tensor infos; the weights stay on disk until touched,
and this module never touches them. What comes back has the shape of Ollama's verbose
`/api/show`: `model_info` (GGUF keys, long arrays left out as Ollama leaves them out, plus
`general.parameter_count` summed from the tensors as Ollama does), `details` (format, family,
parameter size, quantization) and `tensors` ([{name, type, shape}], shapes in GGML order).

Failures are one typed error each, naming the file: missing, not GGUF, cut short. The gguf
package raises bare ValueError / IndexError / struct errors from deep inside numpy; they never
leave this module.
"""

from __future__ import annotations

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


def _parse(path: Path) -> tuple[dict[str, Any], tuple[dict[str, Any], ...]]:
    import gguf

    reader = gguf.GGUFReader(path, "r")
    info: dict[str, Any] = {}
    for key, field in reader.fields.items():
        if key.startswith("GGUF."):
            continue  # the container's own version and counts, not model metadata
        is_array = bool(field.types) and field.types[0] is gguf.GGUFValueType.ARRAY
        if is_array and len(field.data) > MAX_ARRAY_ITEMS:
            info[key] = None
            continue
        info[key] = _plain(field.contents())
    tensors = tuple({"name": t.name, "type": t.tensor_type.name, "shape": [int(d) for d in t.shape]}
                    for t in reader.tensors)
    info["general.parameter_count"] = sum(int(t.n_elements) for t in reader.tensors)
    end = max((int(t.data_offset) + int(t.n_bytes) for t in reader.tensors), default=0)
    if end > len(reader.data):
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
