"""llama.cpp's llama-server `GET /slots` (JSON, one entry per slot; on by default, off with
--no-slots) read into the neutral SlotState, for every backend whose engine is a llama-server: the
llama-server backend itself, and Ollama 0.30 and later, which runs one as its child.

The parser never raises on what a server sends: a slot entry of an unknown shape is skipped and
counted. Field names follow the llama-servers that were recorded (tests/data/llama_server/,
tests/data/ollama/child_slots_*.json), with the older shapes still in use (`state` instead of
`is_processing`, `n_decoded` at the top level, `next_token` as one object)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import httpx

from app.core.server_telemetry import SlotState

CONNECT_TIMEOUT_S = 1.0
READ_TIMEOUT_S = 2.0  # a poll once a second must not pile up behind a stuck server
MAX_BODY_CHARS = 4_000_000  # a /slots answer of a few hundred slots is far below this


def _int(value: Any) -> int | None:
    """An int from a JSON number (bool excluded); None for anything else."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return int(value)


def _busy(entry: Mapping[str, Any]) -> bool | None:
    """Whether a slot works on a task: `is_processing` (newer servers) or `state` != 0 (older)."""
    flag = entry.get("is_processing")
    if isinstance(flag, bool):
        return flag
    state = _int(entry.get("state"))
    return None if state is None else state != 0


def _decoded(entry: Mapping[str, Any]) -> int | None:
    """Tokens generated so far: `next_token[0].n_decoded`, `next_token.n_decoded` or `n_decoded`."""
    nxt = entry.get("next_token")
    if isinstance(nxt, list):
        nxt = nxt[0] if nxt else None
    if isinstance(nxt, Mapping) and "n_decoded" in nxt:
        return _int(nxt.get("n_decoded"))
    return _int(entry.get("n_decoded"))


def parse_slots(decoded: Any) -> tuple[tuple[SlotState, ...], int]:
    """/slots JSON as SlotStates sorted by id, and the count of entries skipped as unreadable."""
    if not isinstance(decoded, list):
        return (), 1
    slots: list[SlotState] = []
    skipped = 0
    for entry in decoded:
        slot_id = _int(entry.get("id")) if isinstance(entry, Mapping) else None
        busy = _busy(entry) if isinstance(entry, Mapping) else None
        if slot_id is None or busy is None:
            skipped += 1
            continue
        prompt = entry.get("n_prompt_tokens", entry.get("n_past"))
        slots.append(SlotState(
            id=slot_id, busy=busy, n_ctx=_int(entry.get("n_ctx")),
            prompt_tokens=_int(prompt) if busy else None,
            prompt_processed=_int(entry.get("n_prompt_tokens_processed")) if busy else None,
            cached_tokens=_int(entry.get("n_prompt_tokens_cache", entry.get("n_cached"))) if busy else None,
            decoded=_decoded(entry) if busy else None))
    return tuple(sorted(slots, key=lambda s: s.id)), skipped


def error_text(status: int, body: str) -> str:
    """llama-server's own words for a failed request (`{"error": {"message"}}`), else the status."""
    try:
        decoded = json.loads(body)
    except ValueError:
        decoded = None
    if isinstance(decoded, Mapping):
        err = decoded.get("error")
        message = err.get("message") if isinstance(err, Mapping) else err
        if isinstance(message, str) and message.strip():
            return f"HTTP {status}: {message.strip()}"
    return f"HTTP {status}" + (f": {body.strip()[:120]}" if body.strip() else "")


def local_client(base_url: str, transport: httpx.AsyncBaseTransport | None = None) -> httpx.AsyncClient:
    """A pooled client for one llama-server, with the poll's short timeouts (seconds)."""
    timeout = httpx.Timeout(connect=CONNECT_TIMEOUT_S, read=READ_TIMEOUT_S, write=READ_TIMEOUT_S, pool=READ_TIMEOUT_S)
    # trust_env=False: a desktop's HTTP(S)_PROXY must not reroute calls to a local server.
    return httpx.AsyncClient(base_url=base_url, timeout=timeout, transport=transport, trust_env=False)


async def fetch_text(client: httpx.AsyncClient, path: str, base_url: str) -> tuple[str | None, str]:
    """(body, "") on 200, else (None, why) in the server's words or the transport's."""
    try:
        response = await client.get(path)
    except httpx.HTTPError as exc:
        return None, f"{path} at {base_url} did not answer ({type(exc).__name__}: {exc or 'no detail'})"
    text = response.text[:MAX_BODY_CHARS]
    if response.status_code != 200:
        return None, f"{path} at {base_url}: {error_text(response.status_code, text)}"
    return text, ""


def slots_from_text(text: str, base_url: str) -> tuple[tuple[SlotState, ...] | None, int, str]:
    """A /slots body as (slots, entries skipped, ""), or (None, 0, why) when it is not JSON."""
    try:
        slots, skipped = parse_slots(json.loads(text))
    except ValueError:
        return None, 0, f"/slots at {base_url} did not answer JSON: {text.strip()[:80]!r}"
    return slots, skipped, ""


__all__ = ["CONNECT_TIMEOUT_S", "MAX_BODY_CHARS", "READ_TIMEOUT_S", "error_text", "fetch_text", "local_client",
           "parse_slots", "slots_from_text"]
