"""API keys in the desktop's secret store, through `keyring` (Secret Service on Linux: GNOME Keyring or
KWallet; the Keychain on macOS; the Credential Locker on Windows).

A key is stored under the service "ollama-deck" with the server's normalised base URL as the user name,
so each server has its own. Nothing here writes a key anywhere else (settings.json, logs) or logs it.
Every call says what happened as a KeyStoreStatus: a machine without a secret store (keyring's
`fail.Keyring`, as on a bare server or a container) is NO_BACKEND, which callers turn into "used for
this session only" with how to fix it (NO_STORE_HINT).
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass

import keyring
import keyring.errors
from keyring.backend import KeyringBackend

SERVICE = "ollama-deck"
KEY_ENV = "OLLAMA_DECK_API_KEY"
NO_STORE_HINT = ("No secret store is available to keep the API key (keyring found no backend), so it is used for "
                 "this session only. To keep it, install and unlock a Secret Service (GNOME Keyring: "
                 "`sudo apt install gnome-keyring`, or KWallet) and save it again with --save-api-key, or set "
                 f"{KEY_ENV} in the environment that starts ollama-deck.")

_log = logging.getLogger(__name__)


class KeyStoreStatus(enum.Enum):
    """What the secret store did with a request."""

    STORED = "stored"  # saved, found or deleted as asked
    NOT_FOUND = "not found"  # the store works but holds no key for that server
    NO_BACKEND = "no secret store"  # keyring has no usable backend on this machine
    FAILED = "failed"  # the store refused or broke (locked, denied, D-Bus failure); see `detail`


@dataclass(frozen=True)
class KeyLookup:
    """A key read from the store: `key` is set only when status is STORED; `detail` says why it failed."""

    status: KeyStoreStatus
    key: str | None = None
    detail: str = ""


def _backend() -> KeyringBackend | None:
    """keyring's backend, None when there is none that can store anything."""
    backend = keyring.get_keyring()
    try:
        from keyring.backends import chainer, fail
    except ImportError:  # pragma: no cover - both ship with keyring
        return backend
    if isinstance(backend, fail.Keyring):
        return None
    if isinstance(backend, chainer.ChainerBackend) and not backend.backends:
        return None
    return backend


def store_available() -> bool:
    """True when keyring has a backend that can keep a key."""
    return _backend() is not None


def _failed(action: str, exc: Exception) -> KeyStoreStatus:
    # The exception's text, never the key: keyring's errors do not carry the secret.
    _log.warning("the secret store could not %s an API key: %s", action, type(exc).__name__)
    return KeyStoreStatus.NO_BACKEND if isinstance(exc, keyring.errors.NoKeyringError) else KeyStoreStatus.FAILED


def get_key(base_url: str) -> KeyLookup:
    """The key kept for the server at base_url (normalised by the caller)."""
    backend = _backend()
    if backend is None:
        return KeyLookup(KeyStoreStatus.NO_BACKEND, detail=NO_STORE_HINT)
    try:
        key = backend.get_password(SERVICE, base_url)
    except Exception as exc:  # any backend failure is reported, not raised
        return KeyLookup(_failed("read", exc), detail=f"{type(exc).__name__}: {exc}")
    if not key:
        return KeyLookup(KeyStoreStatus.NOT_FOUND)
    return KeyLookup(KeyStoreStatus.STORED, key)


def set_key(base_url: str, key: str) -> KeyLookup:
    """Keep `key` for the server at base_url; the outcome (STORED, NO_BACKEND with the hint, FAILED with why)."""
    backend = _backend()
    if backend is None:
        return KeyLookup(KeyStoreStatus.NO_BACKEND, detail=NO_STORE_HINT)
    try:
        backend.set_password(SERVICE, base_url, key)
    except Exception as exc:  # any backend failure is reported, not raised
        return KeyLookup(_failed("store", exc), detail=f"{type(exc).__name__}: {exc}")
    return KeyLookup(KeyStoreStatus.STORED)


def delete_key(base_url: str) -> KeyLookup:
    """Forget the key kept for base_url (NOT_FOUND when there was none)."""
    backend = _backend()
    if backend is None:
        return KeyLookup(KeyStoreStatus.NO_BACKEND, detail=NO_STORE_HINT)
    try:
        backend.delete_password(SERVICE, base_url)
    except keyring.errors.PasswordDeleteError:
        return KeyLookup(KeyStoreStatus.NOT_FOUND)
    except Exception as exc:  # any backend failure is reported, not raised
        return KeyLookup(_failed("delete", exc), detail=f"{type(exc).__name__}: {exc}")
    return KeyLookup(KeyStoreStatus.STORED)


__all__ = ["KEY_ENV", "KeyLookup", "KeyStoreStatus", "NO_STORE_HINT", "SERVICE", "delete_key", "get_key",
           "set_key", "store_available"]
