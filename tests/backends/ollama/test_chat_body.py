"""The load generator's requests as Ollama's /api/chat bodies."""

from __future__ import annotations

from app.backends.ollama.wire import chat_body
from app.core.bench.workload import BenchPrompt, LoadPlan


def test_chat_body_is_streamed_seeded_capped_and_leaves_the_context_alone():
    plan = LoadPlan("qwen3:14b", prompts=(BenchPrompt("a", "hi", system="be brief"), BenchPrompt("b", "yo")),
                    num_predict=64, think=False, seed=10)
    body = chat_body(plan.chat_request(3))
    assert body["stream"] is True and body["think"] is False and body["model"] == "qwen3:14b"
    assert body["options"] == {"seed": 13, "num_predict": 64}  # no num_ctx: that would reload the model
    assert body["messages"] == [{"role": "user", "content": "yo"}]  # request 3 -> prompt 3 % 2
    assert chat_body(plan.chat_request(0))["messages"][0] == {"role": "system", "content": "be brief"}
    assert "think" not in chat_body(LoadPlan("m", think=None).chat_request(0))  # omitted: the model decides
