"""llama-server's models: the one it serves, and the GGUF files of a models folder.

A llama-server process serves the model it was started with (`/props` model_path, `/v1/models`
id and meta); other models are GGUF files on disk that a restart with another `-m` would serve.
The list is both: the served model first, then the folder's files by name (the served file once).
Listing stays cheap — a folder's files are stat'ed, not opened: quantization there comes from the
file name as publishers write it (…-Q4_K_M.gguf). A model's details come from its GGUF header
(app/adapters/gguf_file.py), read on a worker thread and kept while the file's size and mtime
stay the same; the served model's chat template is the server's own (it may override the file's).
"""

from __future__ import annotations

import re
import threading
from dataclasses import replace
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from app.adapters.gguf_file import GgufFile, file_stat, read_gguf, size_label
from app.backends.llama_server.wire import thinking_support
from app.core.model_facts import ModelCapability, ModelFacts
from app.core.models import LocalModel, ModelDetails, RunningModel

GGUF_SUFFIX = ".gguf"
# Projector files (vision towers) beside a model are not models themselves.
PROJECTOR_MARK = "mmproj"
_QUANT_RE = re.compile(r"(?:^|[-_.])((?:IQ|Q)\d(?:_[0-9A-Z]+)*|F16|BF16|F32)(?=$|[-_.])", re.IGNORECASE)
_cache: dict[tuple[Path, int, str], GgufFile] = {}
_cache_lock = threading.Lock()


def quantization_from_name(name: str) -> str:
    """The quantization a GGUF file name states (e.g. "Q4_K_M" in qwen3-14b-Q4_K_M.gguf), or ""."""
    stem = name[: -len(GGUF_SUFFIX)] if name.lower().endswith(GGUF_SUFFIX) else name
    found = _QUANT_RE.findall(stem)
    return found[-1].upper() if found else ""


def gguf_files(models_dir: Path | None) -> list[Path]:
    """The GGUF model files in a folder and its direct subfolders, by path; [] without a folder."""
    if models_dir is None or not models_dir.is_dir():
        return []
    found = {*models_dir.glob("*" + GGUF_SUFFIX), *models_dir.glob("*/*" + GGUF_SUFFIX)}
    return sorted(p for p in found if p.is_file() and PROJECTOR_MARK not in p.name.lower())


def file_model(path: Path) -> LocalModel:
    """A GGUF file on disk as a listed model (name: its file name; model: its path)."""
    size, modified = file_stat(path)
    return LocalModel(name=path.name, model=str(path), size_bytes=size, digest="", modified_at=modified,
                      quantization_level=quantization_from_name(path.name), format="gguf")


def served_model(served: Mapping[str, Any], model_path: str) -> LocalModel:
    """The model llama-server serves, from its `/v1/models` entry and `/props` model_path: size on
    disk when the file is on this machine, else the server's weight size."""
    meta = served.get("meta") or {}
    n_params = meta.get("n_params")
    size, modified = meta.get("size"), ""
    path = Path(model_path) if model_path else None
    if path is not None and path.is_file():
        size, modified = file_stat(path)
    ftype = meta.get("ftype")
    return LocalModel(name=str(served["id"]), model=model_path or str(served["id"]),
                      size_bytes=size if isinstance(size, int) else 0, digest="", modified_at=modified,
                      parameter_size=size_label(n_params) if isinstance(n_params, int) else "",
                      quantization_level=ftype if isinstance(ftype, str) else "", format="gguf")


def loaded_model(entry: LocalModel, slot_context: int | None) -> RunningModel:
    """A served model as a loaded one: llama-server keeps it loaded until it stops, with `slot_context`
    tokens per slot; it does not say how much of it sits in VRAM, so the sizes are None (not known)."""
    return RunningModel(name=entry.name, model=entry.model, size_bytes=None, size_vram_bytes=None,
                        context_length=slot_context or None, parameter_size=entry.parameter_size,
                        quantization_level=entry.quantization_level, format=entry.format)


def listed(served: list[LocalModel], folder: list[Path]) -> list[LocalModel]:
    """The served models first, then the folder's files that are not among them."""
    paths = {_resolved(m.model) for m in served}
    return [*served, *(file_model(p) for p in folder if _resolved(str(p)) not in paths)]


def _resolved(path: str) -> str:
    try:
        return str(Path(path).resolve())
    except (OSError, RuntimeError):
        return path


def names_of(entry: LocalModel) -> tuple[str, ...]:
    """The names a served model answers to: its id, its file path and that file's name."""
    return (entry.name, entry.model, Path(entry.model).name) if entry.model else (entry.name,)


def serving(model: str, served: list[LocalModel]) -> LocalModel | None:
    """The served model `model` names (by id, path or file name), None when it is not served."""
    return next((entry for entry in served if model in names_of(entry)), None)


def model_file(model: str, served: list[LocalModel], folder: list[Path]) -> Path | None:
    """The GGUF file behind a listed name (a served id, a folder file's name, or a path), None if unknown."""
    entry = serving(model, served)
    if entry is not None and entry.model and Path(entry.model).is_file():
        return Path(entry.model)
    for path in folder:
        if model in (path.name, str(path)):
            return path
    candidate = Path(model)
    if candidate.suffix.lower() == GGUF_SUFFIX and candidate.is_absolute() and candidate.is_file():
        return candidate
    return None


def read_cached(path: Path) -> GgufFile:
    """read_gguf(path), kept while the file's size and mtime stay the same (blocking: call off the loop)."""
    size, modified = file_stat(path)
    key = (path, size, modified)
    with _cache_lock:
        hit = _cache.get(key)
    if hit is not None:
        return hit
    info = read_gguf(path)
    with _cache_lock:
        for old in [k for k in _cache if k[0] == path]:
            del _cache[old]
        _cache[key] = info
    return info


def details_from_file(info: GgufFile, template: str | None, verbose: bool) -> ModelDetails:
    """A model's details from its GGUF header; `template` is the server's chat template for the
    served model (None: the file's own). Capabilities: "completion", and "thinking" when the
    template can switch it; otherwise details["thinking_reason"] says why not. The facts are the
    file's own, with its tensors when verbose."""
    chat_template = info.chat_template if template is None else template
    arch = info.architecture
    details = {"format": "gguf", "family": arch, "families": [arch] if arch else [],
               "parameter_size": size_label(info.parameter_count), "quantization_level": info.quantization}
    return _details(info.model_info, details, chat_template, info.tensors if verbose else None,
                    info.modified_at, info.facts() if verbose else replace(info.facts(), tensors=None))


def details_from_server(served: Mapping[str, Any], template: str) -> ModelDetails:
    """Details of a served model whose file is not on this machine: the server's meta only (no
    layer counts, so the estimator cannot price it), and its template's thinking support."""
    meta = served.get("meta") or {}
    info: dict[str, Any] = {"general.parameter_count": meta.get("n_params"), "general.file_type_name": meta.get("ftype")}
    details = {"format": "gguf", "quantization_level": meta.get("ftype") or "",
               "parameter_size": size_label(meta["n_params"]) if isinstance(meta.get("n_params"), int) else ""}
    size = meta.get("size")
    facts = ModelFacts(metadata=info, quantization=str(details["quantization_level"]),
                       size_bytes=size if isinstance(size, int) and not isinstance(size, bool) else None,
                       source=str(served.get("id", "")))
    return _details(info, details, template, None, "", facts)


def _details(model_info: dict[str, Any], details: Mapping[str, Any], template: str,
             tensors: tuple[dict[str, Any], ...] | None, modified_at: str, facts: ModelFacts) -> ModelDetails:
    thinks, why = thinking_support(template)
    out = dict(details)
    if not thinks:
        out["thinking_reason"] = why
    capabilities = ("completion", "thinking") if thinks else ("completion",)
    return ModelDetails(model_info=dict(model_info), capabilities=capabilities, details=out, parameters="",
                        template=template, tensors=tensors, modified_at=modified_at,
                        facts=replace(facts, capabilities=ModelCapability.known(capabilities)))


__all__ = ["details_from_file", "details_from_server", "file_model", "gguf_files", "listed", "loaded_model", "model_file",
           "names_of", "quantization_from_name", "read_cached", "served_model", "serving"]
