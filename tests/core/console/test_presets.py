"""The console's presets: the seed articles' prompts, and a user's edits laid over them."""

from __future__ import annotations

from app.core.console.presets import (BUILTIN_PRESETS, PRESETS_VERSION, Preset, apply_user_data, builtin, edited,
                              is_edited, new_key, read_user_data, user_data, validate_preset)


def test_the_seed_articles_prompts_are_built_in() -> None:
    by_key = {p.key: p for p in BUILTIN_PRESETS}
    essay = by_key["ai-trends-essay-zh"]
    assert essay.prompt == "请用中文写一篇关于人工智能发展趋势的300字短文" and essay.think is False
    assert by_key["math-apples"].think is True and "苹果" in by_key["math-apples"].prompt
    summary = by_key["long-document-summary"]
    assert summary.think is False and len(summary.prompt) > 1500  # long enough to time prompt processing
    assert all(validate_preset(p) == [] for p in BUILTIN_PRESETS)


def test_unedited_presets_are_not_saved_and_edits_round_trip() -> None:
    presets = list(BUILTIN_PRESETS)
    assert user_data(presets) == {"version": PRESETS_VERSION, "presets": []}
    changed = edited(builtin("math-apples"), prompt="小明有12个苹果，每天吃三个，几天吃完？", num_predict=512)
    mine = Preset(key="user-review", title="Code review", prompt="Review this diff", think="high")
    presets = [changed if p.key == changed.key else p for p in presets] + [mine]
    data = user_data(presets)
    assert [entry["key"] for entry in data["presets"]] == ["math-apples", "user-review"]
    loaded, problems = apply_user_data(data)
    assert problems == []
    assert loaded == presets
    assert is_edited(changed) and not is_edited(builtin("math-apples"))


def test_an_edit_saved_by_an_older_build_keeps_the_fields_it_did_not_know() -> None:
    loaded, problems = apply_user_data({"presets": [{"key": "math-apples", "prompt": "1+1?"}]})
    apples = next(p for p in loaded if p.key == "math-apples")
    assert problems == [] and apples.prompt == "1+1?" and apples.think is True
    assert apples.title == builtin("math-apples").title


def test_bad_entries_are_skipped_with_a_reason_and_the_rest_is_used() -> None:
    data = {"version": 1, "presets": [
        "not an object",
        {"title": "no key"},
        {"key": "user-x", "title": "X", "prompt": "", "think": False},
        {"key": "user-y", "title": "Y", "prompt": "ok", "think": "maximum"},
        {"key": "user-z", "title": 5, "prompt": "ok"},
        {"key": "user-fine", "title": "Fine", "prompt": "hello", "num_predict": 64},
    ]}
    loaded, problems = apply_user_data(data)
    assert len(problems) == 5
    assert any("prompt is empty" in p for p in problems)
    assert any("think must be" in p for p in problems)
    assert [p.key for p in loaded][-1] == "user-fine"
    assert len(loaded) == len(BUILTIN_PRESETS) + 1


def test_a_file_in_another_shape_falls_back_to_the_built_ins() -> None:
    loaded, problems = apply_user_data(["a", "list"])
    assert loaded == list(BUILTIN_PRESETS) and "expected shape" in problems[0]


def test_a_newer_file_is_read_as_far_as_understood() -> None:
    _loaded, problems = apply_user_data({"version": PRESETS_VERSION + 1, "presets": []})
    assert "newer version" in problems[0]


def test_new_keys_are_unique_and_readable() -> None:
    assert new_key("My long test!", set()) == "user-my-long-test"
    assert new_key("My long test!", {"user-my-long-test"}) == "user-my-long-test-2"
    assert new_key("???", set()) == "user-preset"


def test_what_this_version_cannot_use_is_carried_into_the_next_save() -> None:
    data = {"version": 1, "folders": ["work"], "presets": [
        {"key": "user-x", "title": "X", "prompt": "", "think": False},
        {"key": "user-a", "title": "A", "prompt": "hi", "tags": ["t"]},
    ]}
    saved = read_user_data(data)
    assert saved.unread == [data["presets"][0]] and saved.extras == {"user-a": {"tags": ["t"]}}
    written = user_data(saved.presets, saved)
    assert written["folders"] == ["work"] and written["presets"][0] == data["presets"][0]
    assert written["presets"][1]["tags"] == ["t"] and written["presets"][1]["prompt"] == "hi"
    assert read_user_data(written).presets == saved.presets


def test_a_duplicated_key_keeps_the_later_entry_in_use_and_the_earlier_in_the_file() -> None:
    earlier = {"key": "math-apples", "prompt": "earlier"}
    saved = read_user_data({"presets": [earlier, {"key": "math-apples"}]})
    apples = next(p for p in saved.presets if p.key == "math-apples")
    assert apples == builtin("math-apples") and saved.unread == [earlier]
    assert "'math-apples' appears twice; the later one is used" in saved.problems[0]
    again = read_user_data(user_data(saved.presets, saved))  # the unedited winner is written to stay the winner
    assert again.presets == saved.presets and again.unread == [earlier]


def test_think_and_num_predict_take_only_what_the_form_and_server_can() -> None:
    assert validate_preset(Preset("k", "T", "p", think=1.0))  # equals True in Python, but is a number
    assert validate_preset(Preset("k", "T", "p", num_predict=2**31))
    assert validate_preset(Preset("k", "T", "p", think="high", num_predict=2**31 - 1)) == []
