"""Font folders for pre-flight tests: a fontconfig configuration that shows Qt only the real font files given
(a Latin one, and a CJK one where this machine has one), so a subprocess sees a machine with or without them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[3]


def installed_font(*fc_args: str) -> Path | None:
    """The first font file fontconfig names for these arguments, None when none (or no fontconfig)."""
    if shutil.which("fc-list") is None:
        return None
    out = subprocess.run(["fc-list", *fc_args, "file"], capture_output=True, text=True, check=False).stdout
    files = sorted(line.split(":")[0].strip() for line in out.splitlines() if line.strip())
    return Path(files[0]) if files else None


def latin_font() -> Path:
    found = installed_font(":family=DejaVu Sans:style=Book") or installed_font(":lang=en:spacing=proportional")
    if found is None:
        pytest.skip("no Latin font installed to build a font folder from")
    return found


def cjk_font() -> Path:
    found = installed_font(":lang=zh")
    if found is None:
        pytest.skip("no CJK font installed here (fc-list :lang=zh is empty): the PASS case needs a real one")
    return found


def font_folder(tmp_path: Path, fonts: list[Path]) -> dict[str, str]:
    """The environment that shows fontconfig only `fonts` (copied into a folder of their own)."""
    folder = tmp_path / "fonts"
    folder.mkdir()
    for font in fonts:
        shutil.copy(font, folder / font.name)
    conf = tmp_path / "fonts.conf"
    conf.write_text(f'<?xml version="1.0"?>\n<!DOCTYPE fontconfig SYSTEM "fonts.dtd">\n<fontconfig><dir>{folder}</dir>'
                    f'<cachedir>{tmp_path / "fc-cache"}</cachedir></fontconfig>\n')
    return {"FONTCONFIG_FILE": str(conf)}


def run_python(code: str, env: Mapping[str, str], timeout_s: float = 240.0) -> subprocess.CompletedProcess[str]:
    """Run `code` with this interpreter in a fresh process on the project, without a display."""
    base = {k: v for k, v in os.environ.items()
            if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM", "QT_SCALE_FACTOR", "FONTCONFIG_FILE")}
    base["PYTHONPATH"] = str(PROJECT_ROOT)
    return subprocess.run([sys.executable, "-c", code], env={**base, **env}, capture_output=True, text=True,
                          timeout=timeout_s, cwd=PROJECT_ROOT, check=False)
