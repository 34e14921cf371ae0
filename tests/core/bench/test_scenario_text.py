"""A scenario as the TOML the Benchmark page edits, and the line a parser's message is about."""

from __future__ import annotations

import pytest

from app.core.bench.scenario import BUILTIN_SCENARIOS, ScenarioError, parse_scenario
from app.core.bench.scenario_text import problem_line, scenario_toml


@pytest.mark.parametrize("name", list(BUILTIN_SCENARIOS))
@pytest.mark.parametrize("scale", [1.0, 0.05])
def test_every_built_in_reads_back_from_its_toml(name, scale):
    scenario = BUILTIN_SCENARIOS[name] if scale == 1.0 else BUILTIN_SCENARIOS[name].scaled(scale)
    text = scenario_toml(scenario)
    assert parse_scenario(text) == scenario
    assert max(len(line) for line in text.splitlines() if not line.startswith(("system", "description", "text"))) < 40


MIXED = scenario_toml(BUILTIN_SCENARIOS["mixed"])


@pytest.mark.parametrize("old, new, at_fault", [
    ('name = "mixed"', 'name = ""', 'name = ""'),
    ('name = "mixed"', 'name = "mixed"\nfoo = 1', "foo = 1"),
    ("turns = 3", "turns = 0", "turns = 0"),
    ("turns = 3", "turns = 3\nbar = 2", "bar = 2"),
    ("rate_rps = 0.2", "rate_rps = -1", "rate_rps = -1"),
    ("mean = 10200", "mean = 0", "mean = 0"),
    ("mean = 10200", "mean = 10200\nextra = 1", "extra = 1"),
    ("turns = 3", "turns = ", "turns = "),  # TOML's own error, with its line
    ("turns = 3", "turns = 3\n[classes.targets", "[classes.targets"),
])
def test_the_line_a_message_is_about_is_the_line_at_fault(old, new, at_fault):
    text = MIXED.replace(old, new, 1)
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(text, "the scenario")
    line = problem_line(text, str(caught.value))
    assert line is not None and text.splitlines()[line - 1] == at_fault


def test_an_error_at_the_end_is_on_the_last_line_and_one_about_no_place_has_none():
    text = 'name = "x"\n[[classes]]\nname = "q"\noutput_tokens = 3\nprompt_tokens = '
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(text)
    assert problem_line(text, str(caught.value)) == 5
    text = MIXED.replace('name = "code-review"', 'name = "customer-qa"')
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(text)
    assert "used twice" in str(caught.value) and problem_line(text, str(caught.value)) is None
