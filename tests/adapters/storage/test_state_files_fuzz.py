"""Fuzzing the three JSON state files through their real stores: arbitrary bytes, arbitrary JSON,
and valid files with one hostile part never raise, and never lose content silently (the
properties are in state_file_properties, for longer runs to reuse)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings

from tests.adapters.storage.state_file_properties import (check_presets_bytes, check_settings_bytes,
                                                          check_window_bytes, file_bytes, presets_documents,
                                                          settings_documents, window_documents)

FUZZ = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                         HealthCheck.too_slow,
                                                                         HealthCheck.data_too_large])


@FUZZ
@given(raw=file_bytes(settings_documents))
def test_any_settings_file_loads_saves_and_loses_nothing_silently(tmp_path: Path, raw: bytes) -> None:
    check_settings_bytes(tmp_path, raw)


@FUZZ
@given(raw=file_bytes(presets_documents))
def test_any_presets_file_loads_saves_and_keeps_what_it_cannot_use(tmp_path: Path, raw: bytes) -> None:
    check_presets_bytes(tmp_path, raw)


@FUZZ
@given(raw=file_bytes(window_documents))
def test_any_window_file_loads_and_saves_without_raising(tmp_path: Path, raw: bytes) -> None:
    check_window_bytes(tmp_path, raw)
