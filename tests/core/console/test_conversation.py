"""Exporting a prompt-console conversation as Markdown and JSON."""

from __future__ import annotations

import json

from app.core.console.conversation import TurnRecord, conversation_json, conversation_markdown
from app.core.console.reply_stats import ReplyStats
from app.core.console.reply_words import ReplyWords

# A server's names for the figures; the export writes them as that server calls them.
WORDS = ReplyWords(output_count="gen_count", count_header="gen\ncount", decode_source="gen_count / gen_time",
                   total_source="total_time", stop_field="stop_cause", think_hint="")

DONE = ReplyStats(ttft_ms=120.0, first_answer_ms=900.0, thinking_tokens=40, answer_tokens=12, wall_ms=1300.0,
                  output_tokens=52, decode_tokens_per_s=48.5, prompt_tokens=30, prompt_tokens_per_s=900.0,
                  load_ms=0.5, total_ms=1290.0, done_reason="stop")


def turns() -> list[TurnRecord]:
    return [
        TurnRecord("What is 17 × 23?", "qwen3:14b", True, thinking="17 × 20 = 340, plus 51 → 391.",
                   answer="**391**", stats=DONE, system="Answer briefly."),
        TurnRecord("And in ```code```?", "qwen3:14b", False, answer="```python\nprint(17 * 23)\n```\n",
                   stats=DONE, system="Answer briefly."),
        TurnRecord("Summarise the document", "qwen3:0.6b", "high", answer="The doc", stopped=True),
        TurnRecord("Hi", "gone:latest", None, error='model "gone:latest" not found, try pulling it first'),
    ]


def test_markdown_has_every_turn_with_its_mode_prompt_thinking_answer_and_figures():
    text = conversation_markdown(turns(), "http://127.0.0.1:11434", "2026-11-30 01:00", words=WORDS)
    assert text.startswith("# Prompt console conversation\n")
    assert "4 turns" in text and "http://127.0.0.1:11434" in text
    assert "## Turn 1 · qwen3:14b · Thinking" in text and "## Turn 2 · qwen3:14b · Non-thinking" in text
    assert "## Turn 3 · qwen3:0.6b · Thinking: high" in text and "## Turn 4 · gone:latest · Model default" in text
    assert text.count("**System prompt:**") == 1 and "> Answer briefly." in text
    assert "*No system prompt from here on.*" in text  # turn 3 was sent without one
    assert "<details><summary>Thinking</summary>" in text and "340, plus 51" in text
    assert "\n**391**\n" in text and "```python\nprint(17 * 23)\n```" in text  # answers as written
    assert "*Stopped before the end.*" in text
    assert '**Error from the server:** model "gone:latest" not found, try pulling it first' in text
    assert text.count("<sub>TTFT 120 ms") == 2 and "decode 48.5 tok/s" in text
    assert "gen_count 52" in text and "stop_cause stop" in text  # the figures under the server's own names


def test_a_prompt_or_trace_full_of_backticks_cannot_break_out_of_its_block():
    trace = "look: ```` four, and ``` three"
    text = conversation_markdown([TurnRecord("q", "m", True, thinking=trace)], "s", "t", words=WORDS)
    assert "`````text\n" + trace + "\n`````" in text  # a fence longer than any run inside
    assert "> And" not in text


def test_json_keeps_the_raw_text_and_every_figure():
    doc = json.loads(conversation_json(turns(), "http://127.0.0.1:11434", "2026-11-30T01:00:00+00:00"))
    assert doc["format"] == "ollama-deck conversation" and doc["version"] == 1
    first, second, third, fourth = doc["turns"]
    assert first["think"] is True and first["system"] == "Answer briefly." and first["answer"] == "**391**"
    assert first["figures"]["eval_count"] == 52 and first["figures"]["ttft_ms"] == 120.0
    assert first["ending"] == "finished (stop)" and second["answer"].startswith("```python")
    assert third["think"] == "high" and third["ending"] == "stopped" and third["figures"] is None
    assert fourth["ending"] == "failed" and "not found" in fourth["error"]


def test_a_burst_exports_one_csv_row_per_copy_and_a_json_with_its_summary():
    import csv
    import io

    from app.core.console.conversation import BurstReply, burst_csv, burst_json
    from app.core.console.reply_stats import summarize_burst

    replies = [BurstReply(0, "done", DONE), BurstReply(1, "failed", None, "model requires more system memory"),
               BurstReply(2, "stopped", None)]
    rows = list(csv.DictReader(io.StringIO(burst_csv(replies))))
    assert [r["reply"] for r in rows] == ["1", "2", "3"]
    assert rows[0]["eval_tokens_per_s"] == "48.5" and rows[0]["done_reason"] == "stop"
    assert rows[1]["state"] == "failed" and rows[1]["ttft_ms"] == "" and "system memory" in rows[1]["error"]
    summary = summarize_burst([DONE, None, None], failed=1, stopped=1)
    doc = json.loads(burst_json(replies, summary, "qwen3:14b", False, "Hi", "http://127.0.0.1:11434", "now"))
    assert doc["format"] == "ollama-deck burst" and doc["copies"] == 3 and doc["think"] is False
    assert doc["summary"]["completed"] == 1 and doc["summary"]["failed"] == 1
    assert doc["replies"][1] == {"reply": 2, "state": "failed", "error": "model requires more system memory",
                                 "figures": None}


def test_an_ab_comparison_has_the_prompt_once_both_replies_and_the_cost():
    from app.core.console.conversation import ab_json, ab_markdown
    from app.core.console.reply_stats import thinking_cost

    plain = ReplyStats(ttft_ms=40.0, first_answer_ms=40.0, thinking_tokens=0, answer_tokens=12, wall_ms=300.0,
                       output_tokens=12, decode_tokens_per_s=48.0, load_ms=0.5, total_ms=290.0, done_reason="stop")
    with_t = TurnRecord("17 × 23?", "qwen3:14b", True, thinking="17 × 20 = 340 …", answer="**391**", stats=DONE)
    without = TurnRecord("17 × 23?", "qwen3:14b", False, answer="391", stats=plain)
    cost = thinking_cost(DONE, plain)
    text = ab_markdown(with_t, without, cost, "http://127.0.0.1:11434", "now", words=WORDS)
    assert "gen_count 52" in text and "gen_count 12" in text  # each reply's figures in the server's words
    assert text.count("> 17 × 23?") == 1 and "## With thinking · Thinking" in text and "\n391\n" in text
    assert "## Cost of thinking" in text and "+40 tokens" in text and "load time left out" in text
    doc = json.loads(ab_json(with_t, without, cost, "s", "t"))
    assert doc["format"] == "ollama-deck a/b" and doc["cost_of_thinking"]["extra_tokens"] == 40
    assert doc["without_thinking"]["ending"] == "finished (stop)"
    assert "not measurable" in ab_markdown(with_t, without, None, "s", "t", words=WORDS)
