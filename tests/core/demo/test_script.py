"""The demo script format: the shipped script reads, every mistake is named with its step and field, and no
input raises anything but ScriptError."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.adapters.demo_script import builtin_text, load_script
from app.core.console.presets import builtin
from app.core.demo.script import (DEFAULT_PRESET, MAX_STEPS, ScriptError, StepAction, parse_script,
                                  script_from_dict)


def test_the_builtin_script_tells_the_five_part_story() -> None:
    script = load_script("builtin")
    assert script.source == "builtin" and script.minutes == 5
    assert [s.action for s in script.steps] == [StepAction.PROMPT, StepAction.BURST, StepAction.PARALLEL,
                                                StepAction.AB, StepAction.SWEEP]
    burst = script.steps[1]
    assert burst.users == 8 and burst.title == "Eight users now"
    assert script.steps[2].values == (1, 8)
    for step in script.steps:
        assert step.says and step.title
        if step.sends_prompts:  # every preset it names is one the app ships
            assert step.prompt or builtin(step.preset) is not None
    assert parse_script(builtin_text()).steps == script.steps


def test_defaults_fill_what_a_step_leaves_out() -> None:
    script = parse_script('[[step]]\ntitle = "a"\nsays = "b"\naction = "burst"\n')
    step = script.steps[0]
    assert step.preset == DEFAULT_PRESET and step.users == 8 and step.max_tokens > 0
    note = parse_script('[[step]]\ntitle = "a"\nsays = "b"\n').steps[0]
    assert note.action is StepAction.NOTE and not note.sends_prompts and not note.changes_server


@pytest.mark.parametrize(("toml", "named"), [
    ('title = "x"', "no steps"),
    ('[[step]]\ntitle = "a"\naction = "prompt"', "says"),
    ('[[step]]\ntitle = "a"\nsays = "b"\naction = "dance"', "'dance' is not one of"),
    ('[[step]]\ntitle = "a"\nsays = "b"\naction = "prompt"\nusers = 3', "'users' is not a field of a prompt step"),
    ('[[step]]\ntitle = "a"\nsays = "b"\naction = "burst"\nusers = 0', "users must be a whole number from 1"),
    ('[[step]]\ntitle = "a"\nsays = "b"\naction = "burst"\nusers = true', "users must be a whole number"),
    ('[[step]]\ntitle = "a"\nsays = "b"\naction = "parallel"\nvalues = [4]', "values must be a list of 2"),
    ('[[step]]\ntitle = "a"\nsays = "b"\naction = "parallel"\nvalues = [4, 4]', "lists a value twice"),
    ('[[step]]\ntitle = "a"\nsays = "b"\naction = "prompt"\nprompt = "p"\npreset = "q"', "not both"),
    ('[[step]]\ntitle = "a"\nsays = "b"\naction = "prompt"\nthink = "yes"', "think is true or false"),
    ('[[step]]\ntitle = "a"\nsays = "b"\ntimeout_s = 1', "timeout_s must be a number from 5"),
    ('[[step]]\ntitle = ""\nsays = "b"', "title must be a non-empty text"),
    ('[[step]]\ntitle = "' + "x" * 61 + '"\nsays = "b"', "at most 60"),
    ('speed = 3\n[[step]]\ntitle = "a"\nsays = "b"', "unknown field 'speed'"),
    ('[[step]', "not valid TOML"),
])
def test_a_mistake_is_named(toml: str, named: str) -> None:
    with pytest.raises(ScriptError, match=named.replace("[", r"\[").replace("(", r"\(")):
        parse_script(toml, "talk.toml")


def test_the_second_step_is_named_when_it_is_the_wrong_one() -> None:
    with pytest.raises(ScriptError, match="talk.toml, step 2"):
        parse_script('[[step]]\ntitle = "a"\nsays = "b"\n[[step]]\ntitle = "c"\n', "talk.toml")


def test_too_many_steps_are_refused() -> None:
    steps = [{"title": "a", "says": "b"}] * (MAX_STEPS + 1)
    with pytest.raises(ScriptError, match=f"at most {MAX_STEPS}"):
        script_from_dict({"step": steps})


def test_files_that_cannot_be_read_say_so(tmp_path: Path) -> None:
    with pytest.raises(ScriptError, match="does not exist"):
        load_script(str(tmp_path / "missing.toml"))
    with pytest.raises(ScriptError, match="is a folder"):
        load_script(str(tmp_path))
    bad = tmp_path / "latin1.toml"
    bad.write_bytes('title = "caf\xe9"'.encode("latin-1"))
    with pytest.raises(ScriptError, match="not UTF-8"):
        load_script(str(bad))
    good = tmp_path / "talk.toml"
    good.write_text('[[step]]\ntitle = "Hello"\nsays = "The room"\n', encoding="utf-8")
    assert load_script(str(good)).steps[0].title == "Hello"


_values = st.recursive(st.none() | st.booleans() | st.integers(-10, 10_000) | st.floats(allow_nan=True)
                       | st.text(max_size=80), lambda inner: st.lists(inner, max_size=4)
                       | st.dictionaries(st.text(max_size=12), inner, max_size=4), max_leaves=12)
_field_names = st.sampled_from(["title", "says", "action", "prompt", "preset", "max_tokens", "think", "users",
                                "values", "parallel", "requests", "use_history", "timeout_s", "other"])
_actions = st.sampled_from([a.value for a in StepAction] + ["BURST", " sweep ", "x"])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.dictionaries(_field_names, _values | _actions, max_size=8), max_size=4), _values)
def test_any_document_is_a_script_or_a_script_error(steps: list[dict[str, object]], minutes: object) -> None:
    data: dict[str, object] = {"step": steps}
    if minutes is not None:
        data["minutes"] = minutes
    try:
        script = script_from_dict(data)
    except ScriptError as exc:
        assert str(exc)
        return
    assert 1 <= len(script.steps) <= MAX_STEPS
    for step in script.steps:
        assert step.title and step.says and step.timeout_s >= 5 and 1 <= step.max_tokens
