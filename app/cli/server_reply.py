"""Tell a hung server from a busy one before a long request: a quick version request first.

The requests the commands make may rightly wait minutes for their first byte: Ollama sends a chat
reply's headers only once the model is loaded, and loading a 14B model from disk on first use
takes tens of seconds. So the long read timeout (300 s) cannot also serve to notice a server that
accepted the connection and will never answer (a stopped process, a wedged proxy, something that
is not HTTP). A version request is answered at once by a healthy server even while a model loads
(Ollama's HTTP handlers stay responsive during a load), so asking for it with a short timeout
first says "no reply" within NO_REPLY_TIMEOUT_S, and the real request keeps the long timeout.
"""

from __future__ import annotations

import asyncio

from app.core.errors import ServerTimeout
from app.core.ports.catalog import ModelCatalog

NO_REPLY_TIMEOUT_S = 10.0


async def require_reply(catalog: ModelCatalog, url: str, timeout_s: float | None = None) -> str:
    """The server's version, asked with a short timeout (s; default NO_REPLY_TIMEOUT_S); ServerTimeout
    when the server accepted the connection but sent nothing back in that time."""
    limit = NO_REPLY_TIMEOUT_S if timeout_s is None else timeout_s
    try:
        return await asyncio.wait_for(catalog.version(), limit)
    except TimeoutError:
        raise ServerTimeout(
            f"The server at {url} accepted the connection but sent no reply within {limit:g} s; is it hung "
            "or still starting?",
            hint="Check its log or restart it; a server busy loading a model still answers this at once.") from None


__all__ = ["NO_REPLY_TIMEOUT_S", "require_reply"]
