"""The `--backend NAME` option of the GUI and of the headless commands that pick a server kind.

The registry is imported only when the option is given, so `--help` and `--version` stay quick;
BACKEND_HELP names the registered backends (a test keeps it in step with the registry)."""

from __future__ import annotations

import argparse

BACKEND_HELP = ("which server kind to drive: ollama (the default), llama_server (llama.cpp's llama-server) or openai "
                "(any OpenAI-compatible server, attached to: vLLM, SGLang, TGI, LM Studio, ...)")


def backend_name(text: str) -> str:
    """argparse type: a registered backend name, else a one-line error naming the known ones."""
    from app.backends import registry

    name = text.strip()
    if name not in registry.names():
        raise argparse.ArgumentTypeError(f"{text!r} is not a backend; choose one of {', '.join(registry.names())}")
    return name


def add_backend_argument(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """Add --backend NAME (default: None = the saved settings' or the default backend)."""
    parser.add_argument("--backend", type=backend_name, metavar="NAME", default=None, help=BACKEND_HELP)


def chosen_backend(args: argparse.Namespace) -> str:
    """The name --backend gave, else the default backend's."""
    from app.backends import registry

    return getattr(args, "backend", None) or registry.DEFAULT_BACKEND


__all__ = ["BACKEND_HELP", "add_backend_argument", "backend_name", "chosen_backend"]
