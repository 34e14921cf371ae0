"""Scenarios executed by the load generator against the stand-in Ollama server (real sockets, real streams):
per-class request counts, arrival order and seeding, conversations whose history grows turn by turn, the
thinking share, and the in-flight cap. Counts and order only: timing belongs in benchmarks/."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from app.adapters.prompt_corpus import bundled_corpus
from app.core.bench.prompt_maker import CorpusPromptMaker
from app.backends.ollama.client import load_client
from app.core.bench.scenario import BUILTIN_SCENARIOS, Arrival, Length, RequestClass, Scenario
from app.core.bench.stats import ClassTargets, class_stats
from app.core.bench.workload import LoadPlan
from app.services.bench.loadgen import LoadGenerator

FAST = dict(num_parallel=4, tokens_per_s=2000.0, prompt_tokens_per_s=1_000_000.0, answer_tokens=6)


def run(url: str, plan: LoadPlan, maker: CorpusPromptMaker | None = None):
    async def go():
        async with LoadGenerator(url, load_client, prompt_maker=maker or CorpusPromptMaker(bundled_corpus(), chars_per_token=0.7)) as generator:
            return await generator.run(plan)

    return asyncio.run(go())


def scenario_plan(scenario: Scenario, **kw) -> LoadPlan:
    values = dict(model="qwen3:0.6b", scenario=scenario, concurrency=0, requests=12, warmup_requests=0)
    values.update(kw)
    return LoadPlan(**values)


def chats(fake) -> list[dict]:
    return [r.json for r in fake.requests if r.path == "/api/chat"]


def test_a_mixed_scenario_sends_each_class_its_share_of_the_requests(make_fake_ollama):
    fake = make_fake_ollama(**FAST)
    mixed = BUILTIN_SCENARIOS["mixed"].scaled(0.01)
    fast = replace(mixed, classes=tuple(replace(c, arrival=Arrival("poisson", c.arrival.rate_rps * 100))
                                        for c in mixed.classes))
    result = run(fake.url, scenario_plan(fast, requests=17))
    by_class = {c.name: [r for r in result.records if r.request_class == c.name] for c in fast.classes}
    assert {name: len(rs) for name, rs in by_class.items()} == {"customer-qa": 10, "long-document": 2,
                                                                 "code-review": 5}
    assert all(r.ok for r in result.records) and len(chats(fake)) == 17
    assert sorted(r.index for r in result.records) == list(range(17))
    # code-review: 3-turn conversations, the last cut so the count is exact (3 + 2).
    turns = sorted((r.conversation, r.turn) for r in by_class["code-review"])
    assert turns == [(0, 1), (0, 2), (0, 3), (1, 1), (1, 2)]
    assert all(r.conversation is not None and r.turn == 1 for r in by_class["customer-qa"])
    stats = class_stats(result.records, [c.name for c in fast.classes],
                        {c.name: c.targets for c in fast.classes})
    assert [(s.name, s.requests, s.requests_ok) for s in stats] == [("customer-qa", 10, 10), ("long-document", 2, 2),
                                                                    ("code-review", 5, 5)]
    assert all(s.met is not None for s in stats)  # the built-ins have targets


def test_a_conversations_next_turn_carries_the_previous_reply_and_grows(make_fake_ollama):
    fake = make_fake_ollama(**FAST)
    review = Scenario("review", (RequestClass("review", Length.fixed(40), Length.fixed(6), Arrival("closed", 0, 1),
                                              turns=4, system="Review this."),))
    result = run(fake.url, scenario_plan(review, requests=4))
    sent = chats(fake)
    assert [(r.conversation, r.turn) for r in result.records] == [(0, 1), (0, 2), (0, 3), (0, 4)]
    for before, after in zip(sent, sent[1:]):
        # Turn n: everything turn n-1 sent, then turn n-1's reply, then a new user text.
        assert after["messages"][:len(before["messages"])] == before["messages"]
        reply = after["messages"][len(before["messages"])]
        assert reply["role"] == "assistant" and reply["content"].strip()
        assert after["messages"][-1]["role"] == "user"
        assert len(after["messages"]) == len(before["messages"]) + 2
    assert sent[0]["messages"][0] == {"role": "system", "content": "Review this."}
    prompts = [r.prompt_tokens for r in result.records]
    assert prompts == sorted(prompts) and prompts[0] < prompts[-1]  # the server counted a growing prompt


def test_the_same_seed_sends_the_same_workload_and_another_seed_another(make_fake_ollama):
    fake = make_fake_ollama(**FAST)
    mix = Scenario("mix", (
        RequestClass("a", Length("normal", 30, 10, 5, 60), Length("uniform", 3, 0, 2, 8), Arrival("poisson", 500.0),
                     thinking_share=0.5, system="A"),
        RequestClass("b", Length("uniform", 10, 0, 5, 20), Length.fixed(4), Arrival("constant", 400.0), system="B"),))

    def sent(seed: int):
        fake.requests.clear()
        result = run(fake.url, scenario_plan(mix, requests=20, seed=seed))
        bodies = sorted(chats(fake), key=lambda b: (b["messages"][-1]["content"], b["options"]["seed"]))
        arrivals = {c: [r.scheduled_s for r in result.records if r.request_class == c] for c in ("a", "b")}
        return bodies, arrivals

    first, arrivals = sent(7)
    again, arrivals_again = sent(7)
    other, _ = sent(8)
    assert first == again and first != other
    assert arrivals["a"] == pytest.approx(arrivals_again["a"], abs=1e-9)
    # Evenly spaced arrivals are due every 1/rate; Poisson ones at seeded random gaps.
    b = sorted(arrivals["b"])
    assert [y - x for x, y in zip(b, b[1:])] == pytest.approx([1 / 400.0] * (len(b) - 1), abs=1e-9)
    a_thinks = [body["think"] for body in first if body["messages"][0]["content"] == "A"]
    b_thinks = [body["think"] for body in first if body["messages"][0]["content"] == "B"]
    assert len(a_thinks) + len(b_thinks) == 20
    assert True in a_thinks and False in a_thinks  # half of class a thinks, drawn per request
    assert set(b_thinks) == {False}
    lengths = [body["options"]["num_predict"] for body in first if body["messages"][0]["content"] == "A"]
    assert all(2 <= n <= 8 for n in lengths) and len(set(lengths)) > 1


def test_closed_loop_clients_and_the_in_flight_cap(make_fake_ollama):
    fake = make_fake_ollama(**FAST)
    two = Scenario("two", (RequestClass("c", Length.fixed(10), Length.fixed(4), Arrival("closed", 0, 3)),
                           RequestClass("o", Length.fixed(10), Length.fixed(4), Arrival("poisson", 1000.0))))
    result = run(fake.url, scenario_plan(two, requests=12, concurrency=1, warmup_requests=2))
    assert len(result.records) == 12 and len(result.warmup) == 2
    assert {r.request_class for r in result.warmup} == {"c", "o"}
    ordered = sorted(result.records, key=lambda r: r.sent_s)
    # One in flight at a time over both classes: each request went out after the one before it ended.
    assert all(a.end_s <= b.sent_s + 1e-3 for a, b in zip(ordered, ordered[1:]))


def test_class_statistics_say_which_target_was_missed():
    from app.core.bench.stats import RequestRecord

    records = [RequestRecord(i, 0.0, 0.0, 1.0, first_token_s=0.1 * (i + 1), output_tokens=10, request_class="q")
               for i in range(4)]
    records.append(RequestRecord(9, 0.0, 0.0, 1.0, error="boom", error_kind="server", request_class="q"))
    (stats,) = class_stats(records, ["q"], {"q": ClassTargets(ttft_avg_ms=200, e2e_p95_ms=2000)})
    assert stats.requests == 5 and stats.requests_ok == 4 and stats.met is False
    assert stats.missed[0] == "1 of 5 requests failed" and "TTFT avg ≤ 200 ms (measured 250 ms)" in stats.missed
    assert not any("E2E" in m for m in stats.missed)
    (ok,) = class_stats(records[:4], ["q"], {"q": ClassTargets(ttft_avg_ms=300)})
    assert ok.met is True and ok.missed == ()
    (none,) = class_stats(records[:4], ["q"])
    assert none.met is None
