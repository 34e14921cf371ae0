"""Two ollama-deck windows on one settings folder: the later Apply does not silently overwrite the earlier one's
change; it is refused once with a message that says so, and applying again replaces it on purpose."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from app.adapters.storage.settings_store import SettingsChangedError, SettingsStore
from app.backends.ollama.tuning import OLLAMA_TUNING

PROJECT_ROOT = Path(__file__).resolve().parents[3]
# The other window: its own process, which loads the folder's settings and applies (saves) a change.
OTHER_WINDOW = r"""
import sys
from pathlib import Path
from app.adapters.storage.settings_store import SettingsStore
from app.backends.ollama.tuning import OLLAMA_TUNING
store = SettingsStore(Path(sys.argv[1]), OLLAMA_TUNING)
store.save(store.load().settings.replace(num_parallel=int(sys.argv[2])))
"""


def _other_window_applies(folder: Path, parallel: int) -> None:
    subprocess.run([sys.executable, "-c", OTHER_WINDOW, str(folder), str(parallel)], cwd=PROJECT_ROOT, check=True,
                   timeout=60)


def _saved_parallel(folder: Path) -> int:
    return json.loads((folder / "settings.json").read_text("utf-8"))["settings"]["num_parallel"]


@pytest.mark.parametrize("file_before", [True, False])
def test_a_change_another_window_applied_is_not_overwritten_unseen(tmp_path: Path, file_before: bool) -> None:
    if file_before:
        SettingsStore(tmp_path, OLLAMA_TUNING).save(SettingsStore(tmp_path, OLLAMA_TUNING).load().settings)
    this_window = SettingsStore(tmp_path, OLLAMA_TUNING)
    mine = this_window.load().settings.replace(keep_alive="1h")
    _other_window_applies(tmp_path, 4)

    with pytest.raises(SettingsChangedError) as refused:
        this_window.save(mine)
    text = refused.value.user_text()
    assert "Not applied" in text and str(this_window.path) in text and "another ollama-deck window" in text
    assert "Apply again to replace it" in text
    assert _saved_parallel(tmp_path) == 4  # the other window's change is still there

    this_window.save(mine)  # applied again: on purpose now
    assert _saved_parallel(tmp_path) == 1
    this_window.save(mine.replace(num_parallel=2))  # its own writes are no conflict
    assert _saved_parallel(tmp_path) == 2
