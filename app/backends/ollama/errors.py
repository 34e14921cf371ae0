"""Names the error family had when it spoke only of Ollama, kept for one release.

The family is `app.core.errors.ServerError` and its subclasses; these aliases let code written
against the old names keep importing them from here.
"""

from __future__ import annotations

from app.core.errors import ServerError, ServerTimeout, ServerUnreachable

OllamaError = ServerError
OllamaConnectError = ServerUnreachable
OllamaTimeout = ServerTimeout

__all__ = ["OllamaConnectError", "OllamaError", "OllamaTimeout"]
