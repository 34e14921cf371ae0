"""Qt's X11 platform plugin (xcb) and the system libraries it needs, checked before Qt loads it.

Without one of them Qt aborts at start with "Could not load the Qt platform plugin "xcb" … even though it
was found" and, since Qt 6.5, blames libxcb-cursor0 whichever library is really missing (on a minimal X
desktop it is often libxcb-icccm4 or libxcb-keysyms1). The launcher asks the dynamic loader instead —
`ldd` on the plugin and on Qt's xcb integration library lists every library that does not resolve — and
prints the one apt-get line that installs them. Nothing here imports Qt: it runs before Qt is loaded.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

# sysexits' EX_OSFILE: a system file the program needs does not exist.
EXIT_MISSING_LIBRARIES = 72

# Debian's package for a shared library is its soname's stem with the version appended (libxcb-icccm.so.4
# -> libxcb-icccm4; a '-' goes between when the stem ends in a digit: libxkbcommon-x11.so.0 ->
# libxkbcommon-x11-0), lower case. The few that do not follow the rule:
_PACKAGE_EXCEPTIONS = {
    "libglib-2.0.so.0": "libglib2.0-0",
    "libgthread-2.0.so.0": "libglib2.0-0",
    "libstdc++.so.6": "libstdc++6",
}
_NOT_FOUND = re.compile(r"^\s*(\S+)\s+=>\s+not found\s*$", re.MULTILINE)


def debian_package(soname: str) -> str:
    """The Debian/Ubuntu package that ships a library, by Debian's naming rule (libxcb-icccm.so.4 -> libxcb-icccm4)."""
    if soname in _PACKAGE_EXCEPTIONS:
        return _PACKAGE_EXCEPTIONS[soname]
    stem, _, version = soname.partition(".so.")
    version = version.split(".")[0]
    if not version:
        return stem.lower()
    return f"{stem}{'-' if stem[-1:].isdigit() else ''}{version}".lower()


def xcb_plugin_files() -> list[Path]:
    """PySide6's xcb platform plugin and Qt's xcb integration library, where the installed PySide6 has them."""
    spec = importlib.util.find_spec("PySide6")
    if spec is None or not spec.submodule_search_locations:
        return []
    qt = Path(next(iter(spec.submodule_search_locations))) / "Qt"
    plugin = qt / "plugins" / "platforms" / "libqxcb.so"
    return [path for path in (plugin, qt / "lib" / "libQt6XcbQpa.so.6") if path.is_file()]


def unresolved_libraries(files: Sequence[Path]) -> list[str]:
    """The libraries the dynamic loader cannot find for these files (ldd's "=> not found"), in order, once
    each; empty when all resolve, or when there is no ldd to ask (Qt then reports for itself)."""
    ldd = shutil.which("ldd")
    if ldd is None or not files:
        return []
    missing: list[str] = []
    for path in files:
        try:
            done = subprocess.run([ldd, str(path)], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            continue
        for soname in _NOT_FOUND.findall(done.stdout):
            if soname not in missing:
                missing.append(soname)
    return missing


def missing_xcb_libraries() -> list[str]:
    """The libraries Qt's xcb plugin needs that this system lacks (sonames)."""
    return unresolved_libraries(xcb_plugin_files())


def platform_will_be_xcb(env: Mapping[str, str]) -> bool:
    """True when Qt will load its xcb plugin: QT_QPA_PLATFORM names xcb first, or it is unset on an X
    display that is not a Wayland session (there Qt picks its wayland plugin)."""
    asked = env.get("QT_QPA_PLATFORM", "").strip()
    if asked:
        return asked.split(";")[0].split(":")[0].strip() == "xcb"
    if env.get("WAYLAND_DISPLAY") or env.get("XDG_SESSION_TYPE", "").lower() == "wayland":
        return False
    return bool(env.get("DISPLAY"))


def xcb_problem(env: Mapping[str, str] | None = None,
                find_missing: Callable[[], list[str]] | None = None) -> str | None:
    """What to tell the user when Qt is about to load its xcb plugin and libraries it needs are missing:
    which ones, and the apt-get line that installs them; None when nothing is in the way."""
    env = os.environ if env is None else env
    if not platform_will_be_xcb(env):
        return None
    missing = (find_missing or missing_xcb_libraries)()
    if not missing:
        return None
    packages = list(dict.fromkeys(debian_package(soname) for soname in missing))
    return (f"Qt's X11 platform plugin (xcb) cannot load: the system lacks {', '.join(missing)}. "
            f"On Debian or Ubuntu install them with:\n    sudo apt-get install {' '.join(packages)}")


__all__ = ["EXIT_MISSING_LIBRARIES", "debian_package", "missing_xcb_libraries", "platform_will_be_xcb",
           "unresolved_libraries", "xcb_plugin_files", "xcb_problem"]


# The screen a headless --screenshot renders on when none is configured: Qt's offscreen default is 800x800,
# and the window opens no larger than its screen, so the 1440x900 window would come out cramped.
SCREENSHOT_SCREEN = (1920, 1080)


def screenshot_platform(env: Mapping[str, str], folder: Path) -> str | None:
    """QT_QPA_PLATFORM for a headless --screenshot: plain `offscreen` gains a configuration file (written in
    folder) with one SCREENSHOT_SCREEN-sized screen; None when the platform is another or already configured."""
    if env.get("QT_QPA_PLATFORM", "").strip() != "offscreen":
        return None
    width, height = SCREENSHOT_SCREEN
    path = folder / f"screen-{width}x{height}.json"
    path.write_text(json.dumps({"screens": [{"name": "screenshot", "x": 0, "y": 0, "width": width,
                                             "height": height, "logicalDpi": 96, "logicalBaseDpi": 96,
                                             "dpr": 1}]}))
    return f"offscreen:configfile={path}"
