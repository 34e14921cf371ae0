"""A GGUF model file's header read into neutral model facts (app/core/model_facts.py).

GGUF is llama.cpp's model format, which every server this app drives runs: the memory estimator
(app/core/model_shape.py) reads the same keys from a file as from a server's model metadata. Only the key/value header and the tensor
infos are read, with plain file reads (long arrays skipped, not decoded: see _Header); the weights stay
on disk, never touched. Not memory-mapped: a file cut short or rewritten while it is read (a download
finishing, a copy over it) would kill the process with SIGBUS on a mapped page that no longer exists,
where a read only comes back short. Arrays nested deeper than any model writes are refused, not followed
down into a RecursionError. The gguf package gives the tensor and file types and block sizes. What comes back is
`model_info` (the GGUF keys, long arrays left out as servers leave them out of their model metadata, plus
`general.parameter_count` summed from the tensors), the quantization named by the file type, and `tensors`
([{name, type, shape}], shapes in GGML order).

Failures are one typed error each, naming the file: missing, not GGUF, cut short. The gguf
package raises bare ValueError / IndexError / struct errors from deep inside numpy; they never
leave this module.
"""

from __future__ import annotations

import math
import os
import struct
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from app.core.errors import DeckError
from app.core.model_facts import ModelFacts

GGUF_MAGIC = b"GGUF"
# Arrays longer than this (token lists, merges, scores) are left out, as servers' model metadata
# leaves them out: they cost megabytes and the estimator takes the vocabulary from token_embd.
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


class GgufDamaged(GgufError):
    """The file's header is readable bytes but not a header any GGUF writer makes (e.g. arrays nested absurdly
    deep); the message says what."""

    hint = "The file is damaged or not a model; download or copy it again."


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
    quantization: str  # the file type's name, e.g. "Q4_K_M"; "" when the header does not say
    tensors: tuple[dict[str, Any], ...]
    chat_template: str

    @property
    def architecture(self) -> str:
        """`general.architecture`, "" when absent."""
        arch = self.model_info.get("general.architecture")
        return arch if isinstance(arch, str) else ""

    @property
    def parameter_count(self) -> int:
        """Weights in the file, summed from its tensors."""
        return int(self.model_info["general.parameter_count"])

    def facts(self) -> ModelFacts:
        """The file as model facts: its keys, tensors, quantization, size on disk and path (no capabilities:
        what a model can do is the server's to say)."""
        return ModelFacts(metadata=self.model_info, tensors=self.tensors, quantization=self.quantization,
                          size_bytes=self.size_bytes, source=str(self.path))


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
    """A parameter count as model lists write it: 134515008 -> "134.5M"."""
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f}{unit}"
    return str(n)


# GGUF value types (gguf.GGUFValueType) with fixed sizes: their struct formats, little-endian.
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
DEFAULT_ALIGNMENT = 32  # bytes, when general.alignment does not say
# Arrays of arrays: the writers nest at most two deep (e.g. a list of pairs); anything past this is damage.
MAX_ARRAY_NESTING = 8
# The header is read in growing slices (each four times the last): the first covers small models' whole header
# (SmolLM2's 49k tokens with their merges take about 2 MiB), the second a 256k-token vocabulary's; a header
# claiming more than the cap is damage, not a model.
FIRST_READ_BYTES = 4 << 20
MAX_HEADER_BYTES = 512 << 20


class _Damaged(ValueError):
    """The header is not one a GGUF writer makes; the text says how."""


class _NeedMore(Exception):
    """The header goes on past the bytes read so far (but not past the file's end)."""


class _Header:
    """A cursor over the first bytes of a GGUF file that reads the key/value header and the tensor infos
    the way the format lays them out, skipping long arrays without decoding them.

    gguf.GGUFReader decodes every array item into numpy views, about two seconds of CPU for a
    vocabulary of 49k tokens (more for larger ones) — time taken from a server decoding on the same
    cores. Its constants (value, tensor and file types, block sizes) are still the library's."""

    def __init__(self, data: bytes, whole: bool) -> None:
        self.data = data
        self.whole = whole  # the bytes reach the file's end: running past them is the file cut short
        self.at = 0

    def _need(self, n: int) -> None:
        if self.at + n > len(self.data):
            if self.whole:
                raise ValueError("the header runs past the end of the file")
            raise _NeedMore

    def take(self, fmt: str) -> Any:
        size = struct.calcsize(fmt)
        self._need(size)
        value = struct.unpack_from(fmt, self.data, self.at)[0]
        self.at += size
        return value

    def string(self) -> bytes:
        length = self.take("<Q")
        self._need(length)
        text = self.data[self.at:self.at + length]
        self.at += length
        return text

    def skip_string(self) -> None:
        length = self.take("<Q")
        self._need(length)
        self.at += length

    def value(self, kind: int, depth: int = 0) -> Any:
        if kind == _STRING:
            return self.string().decode("utf-8", errors="replace")
        if kind == _ARRAY:
            if depth >= MAX_ARRAY_NESTING:
                raise _Damaged(f"its metadata nests arrays more than {MAX_ARRAY_NESTING} deep, which no GGUF "
                               "writer does")
            item_kind, count = self.take("<I"), self.take("<Q")
            if count > MAX_ARRAY_ITEMS:
                self.skip_array(item_kind, count, depth + 1)
                return None
            return [self.value(item_kind, depth + 1) for _ in range(count)]
        return self.take(_SCALARS[kind])  # KeyError for a type GGUF does not have: a damaged file

    def skip_array(self, kind: int, count: int, depth: int) -> None:
        if kind == _STRING:
            for _ in range(count):
                self.skip_string()
        elif kind == _ARRAY:
            for _ in range(count):
                self.value(_ARRAY, depth)
        else:
            length = struct.calcsize(_SCALARS[kind]) * count
            self._need(length)
            self.at += length


def _read_header(handle: Any, size: int) -> tuple[dict[str, Any], list[tuple[str, list[int], Any, int]], int]:
    """The key/values, the tensor infos and where the tensor data starts, from plain reads of the file's start:
    a larger slice each time the header goes on past the one read."""
    want = min(size, FIRST_READ_BYTES)
    while True:
        handle.seek(0)
        data = handle.read(want)
        # A short read: the file ended there (cut while being read); what was read is all there is.
        try:
            return _parse_header(_Header(data, whole=len(data) < want or len(data) >= size))
        except _NeedMore:
            if want >= MAX_HEADER_BYTES:
                raise _Damaged(f"its header goes on past {MAX_HEADER_BYTES >> 20} MiB, far more than any model's "
                               "metadata") from None
            want = min(size, want * 4, MAX_HEADER_BYTES)


def _parse_header(header: _Header) -> tuple[dict[str, Any], list[tuple[str, list[int], Any, int]], int]:
    import gguf  # the tensor types

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
    return info, infos, -(-header.at // alignment) * alignment  # the tensor data begins at the next multiple


def _parse(path: Path) -> tuple[dict[str, Any], tuple[dict[str, Any], ...]]:
    import gguf  # the block sizes

    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        info, infos, start = _read_header(handle, size)
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
    except _Damaged as exc:
        raise GgufDamaged(f"{path} is damaged: {exc}", path) from None
    except (ValueError, IndexError, struct.error, OverflowError, KeyError, UnicodeDecodeError) as exc:
        # The magic was right, so the header or tensor table ran past the end or is garbled.
        raise GgufTruncated(f"{path} ({size} bytes) is cut short or damaged: its GGUF header or tensor data "
                            f"does not fit in the file ({type(exc).__name__})", path) from None
    except OSError as exc:
        raise GgufError(f"GGUF file {path} cannot be read: {exc.strerror or exc}", path) from None
    template = info.get("tokenizer.chat_template")
    return GgufFile(path=path, size_bytes=size, modified_at=modified, model_info=info,
                    quantization=_quantization(info.get("general.file_type")), tensors=tensors, chat_template=template if isinstance(template, str) else "")


__all__ = ["GgufDamaged", "GgufError", "GgufFile", "GgufNotFound", "GgufTruncated", "NotGguf", "file_stat", "read_gguf", "size_label"]
