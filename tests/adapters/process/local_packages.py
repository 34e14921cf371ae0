"""Tiny source distributions for driving a real `pip install` quickly: a package that builds in a
moment, and one whose build waits for a file that is never created (for Cancel).

Each sdist carries its own PEP 517 build backend (no requirements), so pip builds it with
`--no-index --find-links <folder>` and nothing from an index."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

_BACKEND = '''
import base64, hashlib, os, sys, time, zipfile

NAME, VERSION = {name!r}, {version!r}
WAIT_FOR = {wait_for!r}
STARTED = {started!r}


def _build_log():
    for part in range(1, 4):
        print(f"[{{part}}/3] compiling part {{part}} of {{NAME}}", flush=True)


def _wait_forever_unless_released():
    with open(STARTED, "w") as out:
        out.write(str(os.getpid()))
    print("waiting for " + WAIT_FOR, flush=True)
    while not os.path.exists(WAIT_FOR):  # a build that runs until it is killed
        time.sleep(0.05)


def get_requires_for_build_wheel(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    dist = f"{{NAME}}-{{VERSION}}.dist-info"
    os.makedirs(os.path.join(metadata_directory, dist))
    with open(os.path.join(metadata_directory, dist, "METADATA"), "w") as out:
        out.write(f"Metadata-Version: 2.1\\nName: {{NAME}}\\nVersion: {{VERSION}}\\n")
    return dist


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    _build_log()
    if WAIT_FOR:
        _wait_forever_unless_released()
    dist = f"{{NAME}}-{{VERSION}}.dist-info"
    files = {{
        f"{{NAME}}/__init__.py": f"VERSION = {{VERSION!r}}\\n".encode(),
        f"{{dist}}/METADATA": f"Metadata-Version: 2.1\\nName: {{NAME}}\\nVersion: {{VERSION}}\\n".encode(),
        f"{{dist}}/WHEEL": b"Wheel-Version: 1.0\\nGenerator: local\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n",
    }}
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{{path}},sha256={{digest}},{{len(data)}}")
    record.append(f"{{dist}}/RECORD,,")
    wheel_name = f"{{NAME}}-{{VERSION}}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel_name), "w") as whl:
        for path, data in files.items():
            whl.writestr(path, data)
        whl.writestr(f"{{dist}}/RECORD", "\\n".join(record) + "\\n")
    return wheel_name
'''

_PYPROJECT = '''[build-system]
requires = []
build-backend = "local_backend"
backend-path = ["."]

[project]
name = "{name}"
version = "{version}"
'''


def make_sdist(folder: Path, name: str, version: str = "1.0", wait_for: Path | None = None,
               started: Path | None = None) -> Path:
    """Write <folder>/<name>-<version>.tar.gz; with wait_for its build blocks until that file exists,
    after writing the build's pid to `started`."""
    folder.mkdir(parents=True, exist_ok=True)
    root = f"{name}-{version}"
    members = {
        "pyproject.toml": _PYPROJECT.format(name=name, version=version),
        "local_backend.py": _BACKEND.format(name=name, version=version, wait_for=str(wait_for or ""),
                                            started=str(started or "")),
        "PKG-INFO": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
    }
    target = folder / f"{root}.tar.gz"
    with tarfile.open(target, "w:gz") as archive:
        for member, text in members.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{root}/{member}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return target
