"""Every openai-backend test starts from a clean session (no keys, routes or CA bundle remembered) and a real
keyring backend kept in memory, so nothing reaches the desktop's own secret store."""

from __future__ import annotations

from collections.abc import Iterator

import keyring
import pytest
from keyring.backend import KeyringBackend

from app.backends.openai.client import TLS
from app.backends.openai.endpoint import SESSION
from app.adapters.secrets import KEY_ENV


class MemoryKeyring(KeyringBackend):
    """A keyring backend that keeps passwords in a dict (a real backend class, set through keyring.set_keyring)."""

    priority = 1

    def __init__(self) -> None:
        super().__init__()
        self.passwords: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, username: str) -> str | None:
        return self.passwords.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.passwords[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        from keyring.errors import PasswordDeleteError

        if self.passwords.pop((service, username), None) is None:
            raise PasswordDeleteError("no such password")


@pytest.fixture(autouse=True)
def clean_session(monkeypatch: pytest.MonkeyPatch) -> Iterator[MemoryKeyring]:
    """A fresh session and an in-memory keyring for each test; the process's own backend is put back after."""
    before = keyring.get_keyring()
    memory = MemoryKeyring()
    keyring.set_keyring(memory)
    monkeypatch.delenv(KEY_ENV, raising=False)
    SESSION.forget()
    TLS.trust(None)
    yield memory
    SESSION.forget()
    TLS.trust(None)
    keyring.set_keyring(before)


@pytest.fixture
def memory_keyring(clean_session: MemoryKeyring) -> MemoryKeyring:
    """The test's in-memory keyring."""
    return clean_session
