"""Fuzzing every command-line value of `estimate`, `prompt`, `bench` and `exporter`: the generator and the property
are in cli_property.py (benchmarks/fuzz_inputs.py runs the same with thousands of examples)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from app.cli import SUBCOMMANDS
from tests.cli.cli_property import argv_for, check_cli_argv, isolated, playground


@pytest.fixture(scope="module")
def arena(tmp_path_factory: pytest.TempPathFactory):
    """(paths the fuzzer may name, the closed URL), inside an isolated folder for the whole module."""
    folder = tmp_path_factory.mktemp("cli-fuzz")
    paths = playground(folder / "files")
    with isolated(folder / "home") as closed:
        yield paths, closed


FUZZ = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                         HealthCheck.function_scoped_fixture,
                                                                         HealthCheck.filter_too_much])


@pytest.mark.parametrize("command", sorted(SUBCOMMANDS))
def test_any_argv_exits_cleanly_with_one_line_on_bad_input(command: str, arena) -> None:
    paths, closed = arena
    codes: list[int] = []

    @FUZZ
    @given(argv=argv_for(command, paths, closed))
    def check(argv: list[str]) -> None:
        codes.append(check_cli_argv(argv))

    check()
    # The generator must reach past the argument checks too, not only produce rejections.
    assert 2 in codes and set(codes) - {2}, f"{command}: exit codes seen {sorted(set(codes))}"
