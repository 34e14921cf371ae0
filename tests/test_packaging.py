"""The wheel ships every package of app/: a folder left out of pyproject's list would install an
app that fails on its first import of that folder, while the editable install the tests use works.
And the source tree is the package: `python -m app` in a checkout (the README's install line leaves
you there, and the embedded engine's window runs the same way) finds everything, stylesheet and icons
included, with no installed mapping to lean on."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESOURCES = ROOT / "app" / "resources"


def test_every_package_under_app_is_listed_for_the_wheel():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    on_disk = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "app").rglob("__init__.py")}
    assert on_disk - listed == set(), "add these to [tool.setuptools] packages"
    assert listed - on_disk == set(), "these are listed but are not package folders under app/"


def test_the_checkout_finds_its_resources_without_an_install():
    # -S: no site-packages, so no installed copy or editable mapping can supply app.resources; the
    # checkout's root comes first on sys.path, as for `python -m app` run there.
    code = ("import importlib.resources as r; folder = r.files('app.resources'); "
            "print(sorted(p.name for p in folder.iterdir() if p.name != '__init__.py' and p.is_file()))")
    done = subprocess.run([sys.executable, "-S", "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    expected = sorted(p.name for p in RESOURCES.iterdir() if p.is_file() and p.suffix in (".qss", ".svg", ".png"))
    assert "style.qss" in expected and eval(done.stdout) == expected


def test_setuptools_packs_the_stylesheet_icons_and_prompt_corpus(tmp_path):
    # What setuptools' build_py would put in the wheel as app.resources' data files (in a copy: it
    # writes egg-info beside the sources).
    source = tmp_path / "src"
    shutil.copytree(ROOT / "app", source / "app", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    code = ("import json; from setuptools.config.pyprojecttoml import apply_configuration; "
            "from setuptools.dist import Distribution; d = Distribution(); d.script_name = 'setup.py'; "
            "apply_configuration(d, 'pyproject.toml'); c = d.get_command_obj('build_py'); c.ensure_finalized(); "
            "print(json.dumps({p: [s, f] for p, s, _b, f in c.data_files}))")
    done = subprocess.run([sys.executable, "-W", "ignore", "-c", code], cwd=source, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    data = json.loads(done.stdout.strip().splitlines()[-1])
    src, files = data["app.resources"]
    assert Path(src) == Path("app/resources")
    corpus = [f"corpus/{p.name}" for p in (RESOURCES / "corpus").iterdir() if p.suffix == ".txt"]
    assert corpus  # the prompt corpus travels with the stylesheet and icons
    demo = [f"demo/{p.name}" for p in (RESOURCES / "demo").iterdir() if p.suffix == ".toml"]
    assert "demo/builtin.toml" in demo  # the shipped demo script too
    assert sorted(files) == sorted([p.name for p in RESOURCES.iterdir() if p.suffix in (".qss", ".svg", ".png")]
                                   + corpus + demo)
