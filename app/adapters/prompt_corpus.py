"""The bundled prompt corpus: the text benchmark prompts of a requested length are cut from.

It ships as package data (app/resources/corpus/*.txt): the two articles on tuning a 14B model's batch
size and serving scenarios that this app's benchmark follows, so long prompts read like the documents
people send, not like repeated filler a server's cache or a tokenizer would treat differently.
"""

from __future__ import annotations

from importlib import resources

CORPUS_PACKAGE = "app.resources"
CORPUS_FOLDER = "corpus"


def bundled_corpus() -> str:
    """Every corpus file's text, in file-name order, one after another (blank line between)."""
    folder = resources.files(CORPUS_PACKAGE).joinpath(CORPUS_FOLDER)
    texts = [entry.read_text(encoding="utf-8") for entry in sorted(folder.iterdir(), key=lambda e: e.name)
             if entry.name.endswith(".txt")]
    if not texts:
        raise FileNotFoundError(f"no corpus files in {CORPUS_PACKAGE}/{CORPUS_FOLDER}: the installation is incomplete")
    return "\n\n".join(texts)


__all__ = ["bundled_corpus"]
