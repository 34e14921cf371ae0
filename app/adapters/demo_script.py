"""Reads a demo script: the built-in one shipped with the app, or a TOML file the presenter wrote."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from app.core.demo.script import DemoScript, ScriptError, parse_script

BUILTIN = "builtin"
MAX_SCRIPT_BYTES = 1 << 20


def builtin_text() -> str:
    """The shipped script's TOML."""
    return resources.files("app.resources").joinpath("demo/builtin.toml").read_text(encoding="utf-8")


def load_script(name: str) -> DemoScript:
    """`builtin` or a path to a TOML file; ScriptError says what is wrong (unreadable, too large, invalid)."""
    if name.strip().lower() == BUILTIN:
        return parse_script(builtin_text(), BUILTIN)
    path = Path(name).expanduser()
    try:
        if path.stat().st_size > MAX_SCRIPT_BYTES:
            raise ScriptError(f"{path} is larger than {MAX_SCRIPT_BYTES // 1024} KiB; a demo script is a short TOML file")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ScriptError(f"{path} does not exist; give a TOML file or 'builtin'") from None
    except IsADirectoryError:
        raise ScriptError(f"{path} is a folder; give a TOML file or 'builtin'") from None
    except UnicodeDecodeError:
        raise ScriptError(f"{path} is not UTF-8 text; save the script as UTF-8") from None
    except OSError as exc:
        raise ScriptError(f"{path} cannot be read: {exc.strerror or exc}") from None
    return parse_script(text, str(path))
