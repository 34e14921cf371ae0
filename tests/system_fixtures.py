"""Debian's nginx and Prometheus for the fleet tests: the real programs, found on PATH or in /usr/sbin.

Without them a test that asks for these fixtures is skipped with the install command; with
DECK_REQUIRE_NGINX=1 / DECK_REQUIRE_PROMETHEUS=1 (CI sets both; openssl goes with nginx) it fails instead, so a CI run never
passes without having used them."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

SEARCH_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/usr/local/sbin", "/sbin"])


def _required(variable: str) -> bool:
    return os.environ.get(variable, "").strip() not in ("", "0")


def _find(program: str, package: str, variable: str) -> Path:
    found = shutil.which(program, path=SEARCH_PATH)
    if found is None:
        reason = f"{program} not found; install Debian's package with: sudo apt-get install -y {package}"
        if _required(variable):
            pytest.fail(f"{reason} ({variable}=1 is set, so this fails instead of skipping)", pytrace=False)
        pytest.skip(reason)
    return Path(found)


@pytest.fixture(scope="session")
def nginx_binary() -> Path:
    """Debian's nginx (package nginx)."""
    return _find("nginx", "nginx", "DECK_REQUIRE_NGINX")


@pytest.fixture(scope="session")
def openssl_binary() -> Path:
    """OpenSSL's command (package openssl), for the self-signed certificates of the HTTPS tests; required with
    nginx (DECK_REQUIRE_NGINX=1), which terminates TLS in them."""
    return _find("openssl", "openssl", "DECK_REQUIRE_NGINX")


@pytest.fixture(scope="session")
def prometheus_binary() -> Path:
    """Debian's Prometheus server (package prometheus)."""
    return _find("prometheus", "prometheus", "DECK_REQUIRE_PROMETHEUS")
