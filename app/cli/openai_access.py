"""How the commands and the GUI reach an OpenAI-compatible server (`--backend openai`): its base URL, API key
and TLS trust, set up once for the run.

--url takes the server's base either way it is usually written, `http://HOST:PORT` (vLLM prints
http://0.0.0.0:8000) or the API root `https://HOST/v1` (as OpenAI's SDKs take it): a trailing /v1 is dropped,
a missing port is 443 for https and 8000 for http. The key comes from --api-key-env VAR (the variable's value;
never a flag holding the key itself, which would sit in the shell history and the process list), else
OLLAMA_DECK_API_KEY, else the desktop's secret store; --save-api-key keeps it there for that URL. A key sent
over plain http to another machine is warned about. None of these is written to settings or logs.
"""

from __future__ import annotations

import argparse
import os
import ssl
from typing import TYPE_CHECKING

from app.cli.checks import ArgProblem

if TYPE_CHECKING:
    from app.core.server.url import ServerUrl

ACCESS_FLAGS = ("ca_bundle", "api_key_env", "save_api_key")
BACKEND = "openai"


def add_access_arguments(parser: argparse.ArgumentParser) -> None:
    """Add --api-key-env, --save-api-key and --ca-bundle (for --backend openai)."""
    g = parser.add_argument_group(
        "OpenAI-compatible servers (--backend openai; --url is http://HOST:PORT or https://HOST[/v1], /v1 dropped, "
        "port 8000 for http and 443 for https when left out)")
    g.add_argument("--api-key-env", metavar="VAR",
                   help="read the server's API key (sent as Authorization: Bearer) from the environment variable VAR; "
                        "without it OLLAMA_DECK_API_KEY, then the key kept in the desktop's secret store for --url")
    g.add_argument("--save-api-key", action="store_true",
                   help="keep the key from --api-key-env in the desktop's secret store (keyring) for --url; never in "
                        "the settings")
    g.add_argument("--ca-bundle", metavar="FILE",
                   help="for an https:// server whose certificate a private CA signed (or a self-signed one): trust "
                        "the CA certificates in this PEM file instead of the system's. Verification stays on")


def used_flags(args: argparse.Namespace) -> list[str]:
    """The access flags given, as written on the command line."""
    return ["--" + name.replace("_", "-") for name in ACCESS_FLAGS if getattr(args, name, None)]


def prepare(args: argparse.Namespace, backend_name: str, url_text: str | None) -> tuple[str | None, list[str]]:
    """Set up this run's access to the server and return (its normalised base URL, or None when --url was not
    given; notes and warnings for stderr). ArgProblem for a flag the backend does not take, an unusable URL, an
    empty or unset key variable, an unreadable CA bundle."""
    if backend_name != BACKEND:
        if flags := used_flags(args):
            raise ArgProblem(f"{', '.join(flags)} only applies to --backend openai (an OpenAI-compatible server)")
        return None, []
    from app.adapters.secrets import KeyStoreStatus, set_key
    from app.backends.openai.client import TLS
    from app.backends.openai.endpoint import CLEAR_TEXT_WARNING, SESSION, header_safe, key_in_clear
    from app.core.server.url import ServerUrlError

    ca_bundle, key_env, save = (getattr(args, name, None) for name in ACCESS_FLAGS)
    notes: list[str] = []
    url: str | None = None
    if url_text is not None:
        try:
            url = parse_base_url(url_text).base_url
        except ServerUrlError as exc:
            raise ArgProblem(f"--url: {exc.user_text()}") from None
    if ca_bundle:
        if not os.path.isfile(ca_bundle) or not os.access(ca_bundle, os.R_OK):
            raise ArgProblem(f"--ca-bundle {ca_bundle}: no such readable file; give a PEM file of CA certificates")
        TLS.trust(ca_bundle)
        try:
            TLS.context()
        except (ssl.SSLError, OSError, ValueError) as exc:
            TLS.trust(None)
            raise ArgProblem(f"--ca-bundle {ca_bundle}: not a PEM file of CA certificates ({exc}); give the CA "
                             "certificate the server's certificate was signed with, in PEM") from None
    if save and not key_env:
        raise ArgProblem("--save-api-key keeps the key given with --api-key-env VAR; add it")
    if key_env:
        key = os.environ.get(key_env, "")
        if key.strip() and not header_safe(key.strip()):
            raise ArgProblem(f"--api-key-env {key_env}: its value has characters an HTTP header cannot carry "
                             "(only printable ASCII without spaces); check that it holds the key alone")
        if not key.strip():
            raise ArgProblem(f"--api-key-env {key_env}: that environment variable is "
                             f"{'empty' if key_env in os.environ else 'not set'}; export it with the key first")
        if url is None:
            raise ArgProblem("--api-key-env needs --url: the key belongs to one server's URL")
        SESSION.remember(url, key.strip())
        if save:
            saved = set_key(url, key.strip())
            if saved.status is KeyStoreStatus.STORED:
                notes.append(f"the API key for {url} is kept in the desktop's secret store")
            else:
                notes.append(f"the API key was not saved ({saved.status.value}): {saved.detail}")
    if url is not None:
        found = SESSION.find(url)
        if found.store is KeyStoreStatus.FAILED:
            notes.append("the desktop's secret store could not be read; no key from it is used")
        if key_in_clear(url, found.key is not None):
            from urllib.parse import urlsplit

            notes.append("warning: " + CLEAR_TEXT_WARNING.format(host=urlsplit(url).hostname))
    return url, notes


def parse_base_url(url: str) -> ServerUrl:
    """An OpenAI-compatible server's base URL read (see the module docstring)."""
    from app.backends.openai.endpoint import parse_base_url as parse

    return parse(url)


def route(plain_url: str, full_url: str) -> None:
    """Clients made for plain_url (the settings' http://HOST:PORT) go to full_url for the rest of this run."""
    from app.backends.openai.endpoint import SESSION

    SESSION.route(plain_url, full_url)


def gui_url(args: argparse.Namespace) -> tuple[str | None, list[str]]:
    """For the window with --backend openai: set up access (see prepare) and return the http://HOST:PORT its
    settings can hold, routed for this run to the full URL given (https, a path prefix); with notes."""
    url, notes = prepare(args, args.backend or "", args.url)
    if url is None:
        return None, notes
    plain = f"http://{parse_base_url(url).authority}"
    route(plain, url)
    return plain, notes


__all__ = ["add_access_arguments", "gui_url", "parse_base_url", "prepare", "route", "used_flags"]
