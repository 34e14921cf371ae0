"""Scenarios as data: parsing (valid and invalid files), length sampling, reproducible requests, splitting a
request count over classes, scaling, and the round trip through a saved run."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.bench.scenario import (BUILTIN_SCENARIOS, MAX_TOKENS, Arrival, Length, RequestClass, Scenario,
                                     ScenarioError, parse_scenario, parse_scenario_data, request_rng)
from app.core.bench.stats import ClassTargets, RequestRecord
from app.core.bench.workload import LoadPlan
from app.core.ports.prompt_text import PromptText
from app.services.bench.loadgen import scenario_request

TOML = """
name = "mine"
description = "two kinds of work"

[[classes]]
name = "chat"
prompt_tokens = { dist = "normal", mean = 80, sd = 20, min = 20, max = 200 }
output_tokens = { dist = "uniform", min = 60, max = 180 }
arrival = { kind = "constant", rate_rps = 1.5 }
thinking_share = 0.25
system = "Be brief."
targets = { ttft_avg_ms = 500, ttft_p95_ms = 600, e2e_p95_ms = 4000 }

[[classes]]
name = "review"
prompt_tokens = 300
output_tokens = 400
turns = 3
share = 2
arrival = { kind = "closed", concurrency = 2 }
"""


def test_a_toml_file_gives_every_field():
    s = parse_scenario(TOML, "mine.toml")
    chat, review = s.classes
    assert s.name == "mine" and s.description == "two kinds of work" and s.scale == 1.0
    assert chat.prompt_tokens == Length("normal", 80.0, 20.0, 20, 200)
    assert chat.output_tokens == Length("uniform", 120.0, 0.0, 60, 180)
    assert chat.arrival == Arrival("constant", 1.5) and chat.thinking_share == 0.25 and chat.system == "Be brief."
    assert chat.targets == ClassTargets(ttft_avg_ms=500, ttft_p95_ms=600, e2e_p95_ms=4000)
    assert review.prompt_tokens == Length.fixed(300) and review.turns == 3 and review.share == 2
    assert review.arrival == Arrival("closed", 0.0, 2) and review.targets == ClassTargets()
    # JSON says the same, and a scenario survives its own serialisation (kept with its runs).
    assert parse_scenario(json.dumps(s.to_json())) == s
    assert parse_scenario_data(json.loads(json.dumps(s.scaled(0.1).to_json()))) == s.scaled(0.1)


@pytest.mark.parametrize("text, words", [
    ("", "is empty"),
    ("name = 'x'", "classes has no entries"),
    ("name = ''\n[[classes]]\nname='a'\nprompt_tokens=1\noutput_tokens=1", "name is missing or empty"),
    ("name = 'x'\ncolour = 1\n[[classes]]\nname='a'\nprompt_tokens=1\noutput_tokens=1", "unknown field 'colour'"),
    ("name = 'x'\n[[classes]]\nname='a'\noutput_tokens=1", "classes[0].prompt_tokens is missing"),
    ("name = 'x'\n[[classes]]\nname='a'\nprompt_tokens=5", "classes[0].output_tokens is missing"),
    ("name = 'x'\n[[classes]]\nname='a'\nprompt_tokens=2000000\noutput_tokens=1",
     "classes[0].prompt_tokens = 2000000: must be a token count from 1 to 1048576"),
    ("name = 'x'\n[[classes]]\nname='a'\nprompt_tokens={dist='normal', mean=10, sd=-1}\noutput_tokens=1",
     "classes[0].prompt_tokens.sd = -1: must be a number from 0 to 1048576"),
    ("name = 'x'\n[[classes]]\nname='a'\nprompt_tokens={dist='uniform', min=10, max=5}\noutput_tokens=1",
     "classes[0].prompt_tokens.max = 5: must be at least min (10)"),
    ("name = 'x'\n[[classes]]\nname='a'\nprompt_tokens={dist='zipf', mean=3}\noutput_tokens=1",
     "classes[0].prompt_tokens.dist = 'zipf': must be one of normal, uniform"),
    ("name = 'x'\n[[classes]]\nname='a'\nprompt_tokens=5\noutput_tokens=1\narrival={kind='burst'}",
     "classes[0].arrival.kind = 'burst': must be one of poisson, constant, closed"),
    ("name = 'x'\n[[classes]]\nname='a'\nprompt_tokens=5\noutput_tokens=1\narrival={kind='poisson', rate_rps=0}",
     "classes[0].arrival.rate_rps = 0: must be a number above 0 to 10000"),
    ("name = 'x'\n[[classes]]\nname='a'\nprompt_tokens=5\noutput_tokens=1\narrival={kind='closed', concurrency=1.5}",
     "classes[0].arrival.concurrency = 1.5: must be a whole number from 1 to 1024"),
    ("name = 'x'\n[[classes]]\nname='a'\nprompt_tokens=5\noutput_tokens=1\nturns=0",
     "classes[0].turns = 0: must be a whole number from 1 to 100"),
    ("name = 'x'\n[[classes]]\nname='a'\nprompt_tokens=5\noutput_tokens=1\ntargets={ttft_avg_ms=-3}",
     "classes[0].targets.ttft_avg_ms = -3: must be a number above 0"),
    ("name = 'x'\n[[classes]]\nname='a'\nprompt_tokens=5\noutput_tokens=1\n[[classes]]\nname='a'\nprompt_tokens=5\n"
     "output_tokens=1", "class name 'a' is used twice"),
    ("{\"name\": \"x\", ", "is not valid JSON"),
    ("name = 'x'\n[[classes]]\nname='a'\nprompt_tokens=true\noutput_tokens=1", "classes[0].prompt_tokens = True"),
])
def test_an_invalid_scenario_is_refused_naming_the_field_and_value(text, words):
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(text, "f.toml")
    assert words in str(caught.value)


@settings(max_examples=60, deadline=None)
@given(st.one_of(st.integers(), st.floats(allow_nan=True), st.text(max_size=5), st.booleans(), st.none(),
                 st.lists(st.integers(), max_size=2), st.dictionaries(st.sampled_from(["dist", "mean", "sd", "min",
                                                                                       "max", "x"]),
                                                                      st.one_of(st.integers(), st.floats(),
                                                                                st.text(max_size=3)), max_size=4)))
def test_any_length_value_parses_into_bounds_or_is_refused_with_a_scenario_error(value):
    data = {"name": "x", "classes": [{"name": "a", "prompt_tokens": value, "output_tokens": 3}]}
    try:
        s = parse_scenario_data(data)
    except ScenarioError as exc:
        assert "prompt_tokens" in str(exc)
        return
    length = s.classes[0].prompt_tokens
    import random

    draws = [length.sample(random.Random(i)) for i in range(20)]
    assert all(max(1, length.low) <= d <= min(length.high, MAX_TOKENS) for d in draws)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(min_value=0.01, max_value=100), min_size=1, max_size=6), st.integers(1, 500))
def test_a_request_count_is_split_exactly_and_every_class_gets_one(weights, requests):
    classes = tuple(RequestClass(f"c{i}", Length.fixed(1), Length.fixed(1), Arrival("poisson", w))
                    for i, w in enumerate(weights))
    counts = Scenario("s", classes).split(requests)
    assert sum(counts) == max(requests, len(weights)) and min(counts) >= 1
    # Never more than one off the exact share, unless the at-least-one rule had to lift a class.
    total = sum(weights)
    exact = [requests * w / total for w in weights]
    if min(exact) >= 1:
        assert all(abs(n - x) < 1 + 1e-9 for n, x in zip(counts, exact))


def test_mixed_splits_by_the_articles_rates():
    assert BUILTIN_SCENARIOS["mixed"].split(17) == (10, 2, 5)  # 1 : 0.2 : 0.5 requests/s


def test_draws_are_reproducible_per_request_and_clipped():
    normal = Length("normal", 80, 40, 20, 200)
    first = [normal.sample(request_rng(7, "a", c, t)) for c in range(50) for t in (1, 2)]
    assert first == [normal.sample(request_rng(7, "a", c, t)) for c in range(50) for t in (1, 2)]
    assert first != [normal.sample(request_rng(8, "a", c, t)) for c in range(50) for t in (1, 2)]
    assert min(first) >= 20 and max(first) <= 200 and len(set(first)) > 10
    uniform = Length("uniform", 0, 0, 5, 9)
    assert {uniform.sample(request_rng(1, "u", i, 1)) for i in range(200)} == {5, 6, 7, 8, 9}


class Echo:
    """A maker whose text says what was asked, so a request shows its drawn length and seed."""

    def make(self, tokens: int, seed: int) -> PromptText:
        return PromptText(f"{tokens}:{seed}", tokens)


def test_a_turns_request_has_the_system_prompt_the_history_and_a_new_text():
    cls = RequestClass("r", Length("normal", 50, 10, 1, 100), Length.fixed(9), turns=3, system="S",
                       thinking_share=1.0)
    plan = LoadPlan(model="m", scenario=Scenario("s", (cls,)), concurrency=0)
    history = ({"role": "user", "content": "old"}, {"role": "assistant", "content": "reply"})
    request, user = scenario_request(plan, cls, 4, 2, history, Echo())
    assert [m["content"] for m in request.messages] == ["S", "old", "reply", user]
    assert request.max_tokens == 9 and request.think is True and request.model == "m"
    again, _ = scenario_request(plan, cls, 4, 2, history, Echo())
    assert again == request  # same seed, same request
    other, _ = scenario_request(plan, cls, 4, 3, history, Echo())
    assert other.seed != request.seed


def test_scaling_shortens_every_length_and_says_so():
    mixed = BUILTIN_SCENARIOS["mixed"].scaled(0.05)
    assert mixed.scale == 0.05 and "lengths × 0.05" in mixed.describe()
    qa, doc, review = mixed.classes
    assert doc.prompt_tokens.mean == pytest.approx(510) and doc.prompt_tokens.low == 200
    assert qa.output_tokens.mean == pytest.approx(6) and review.turns == 3
    assert mixed.scaled(0.5).scale == pytest.approx(0.025)
    with pytest.raises(ScenarioError, match="between"):
        mixed.scaled(0)


def test_the_built_ins_carry_the_articles_numbers():
    b = BUILTIN_SCENARIOS
    assert (b["customer-qa"].classes[0].prompt_tokens.mean, b["customer-qa"].classes[0].output_tokens.mean,
            b["customer-qa"].classes[0].arrival.rate_rps) == (80, 120, 1.0)
    assert (b["long-document"].classes[0].prompt_tokens.mean, b["long-document"].classes[0].output_tokens.mean,
            b["long-document"].classes[0].arrival.rate_rps) == (10_200, 320, 0.2)
    review = b["code-review"].classes[0]
    assert review.mean_prompt_tokens() == pytest.approx(1200) and review.output_tokens.mean == 450
    assert review.arrival.rate_rps == 0.5 and review.turns > 1
    assert b["content-generation"].classes[0].text == "请用中文写一篇关于人工智能发展趋势的300字短文"
    assert [c.name for c in b["mixed"].classes] == ["customer-qa", "long-document", "code-review"]


def test_a_plan_keeps_its_scenario_and_old_plans_load_without_one():
    plan = LoadPlan(model="m", scenario=BUILTIN_SCENARIOS["code-review"].scaled(0.1), concurrency=0, requests=6)
    again = LoadPlan.from_json(json.loads(json.dumps(plan.to_json())))
    assert again.scenario == plan.scenario and again.problems() == []
    old = LoadPlan(model="m").to_json()
    assert "scenario" not in old and LoadPlan.from_json(old).scenario is None
    assert LoadPlan.from_json({**old, "scenario": {"name": ""}}).scenario is None  # unreadable: none


def test_records_write_scenario_fields_only_when_they_have_them():
    plain = RequestRecord(0, 0.0, 0.0, 1.0)
    assert not {"request_class", "conversation", "turn"} & set(plain.to_json())
    assert RequestRecord.from_json(plain.to_json()) == plain
    turn = RequestRecord(1, 0.0, 0.0, 1.0, request_class="r", conversation=3, turn=2)
    assert RequestRecord.from_json(turn.to_json()) == turn


def test_the_readmes_example_scenario_parses():
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text(encoding="utf-8")
    block = readme.split("```toml", 1)[1].split("```", 1)[0]
    scenario = parse_scenario(block, "README.md")
    assert [c.name for c in scenario.classes] == ["questions", "review"]
    assert scenario.classes[1].mean_prompt_tokens() == pytest.approx(1200)


def test_the_output_cap_is_the_largest_a_class_sends() -> None:
    assert Length.fixed(120).upper == 120
    assert Length("uniform", 0.0, 0.0, 60, 180).upper == 180
    assert Length("normal", 320.0, 40.0, 100, 1000).upper == 440  # three sd above the mean
    assert Length("normal", 320.0, 40.0, 100, 400).upper == 400  # its top clips it
    scenario = Scenario("two", (RequestClass("a", Length.fixed(80), Length.fixed(120)),
                                RequestClass("b", Length.fixed(9000), Length("normal", 320.0, 40.0, 100, 1000))))
    assert scenario.output_cap == 440
    assert LoadPlan(model="m", scenario=scenario, concurrency=0, requests=4).output_cap == 440
    assert LoadPlan(model="m", prompts=("hi",), num_predict=64).output_cap == 64
