"""Ollama's log lines about its llama-server child, read from what the real Ollama 0.32.15 logged
(tests/data/ollama/log_starting_llama_server.txt, recorded by record_child.py), and the child's
recorded /slots read by the shared slot parser."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from app.adapters.http.llama_slots import parse_slots
from app.adapters.process.attached_log import MARK
from app.backends.ollama.child import (ChildWatch, ChildWatches, command_from_argv, parse_command, parse_log_line,
                                       runs_llama_server, slog_fields)

DATA = Path(__file__).resolve().parents[2] / "data" / "ollama"
LOG = (DATA / "log_starting_llama_server.txt").read_text().splitlines()


def events(lines: list[str]) -> list:
    return [e for e in map(parse_log_line, lines) if e is not None]


def test_the_recorded_log_holds_three_servers_each_with_one_child() -> None:
    found = events(LOG)
    assert [e.kind for e in found] == ["listening", "starting", "started", "started"] * 2 + \
        ["listening", "starting", "terminated"]
    first, second = found[1].command, found[5].command
    assert found[0].version == "0.32.15" and found[0].address.startswith("127.0.0.1:")
    assert found[1].logged_at == "2026-12-01T13:58:06.073Z" and found[2].seconds == 5.68
    assert first.program == "/tmp/real-ollama/lib/ollama/llama-server"
    assert first.port == 35195 and first.host == "127.0.0.1" and first.base_url == "http://127.0.0.1:35195"
    assert (first.context_total, first.parallel, first.context_per_slot) == (2048, 2, 1024)
    assert (first.batch, first.ubatch, first.flash_attn, first.cache_types) == (512, 512, "auto", ("f16", "f16"))
    assert first.model.endswith("/models/blobs/sha256-941f309b54caaad6747569ba43712bcde44a2be3bae16c3282ff499c37c54af5")
    assert first.summary() == "-np 2 · -c 2048 (1024 per slot) · -b 512 -ub 512 · flash-attn auto · KV f16"
    assert (second.port, second.parallel, second.context_total) == (32937, 3, 3072)
    assert second.cache_types == ("q8_0", "q8_0") and second.flash_attn == "on"
    assert "--no-webui" in second.argv and second.options["--no-webui"] is None and second.options["--keep"] == "4"


def test_the_command_text_is_the_logged_one_word_for_word() -> None:
    logged = next(slog_fields(line)["cmd"] for line in LOG if 'msg="starting llama-server"' in line)
    assert parse_command(logged).text == logged  # no word with a space in it: nothing to quote


def test_the_watch_follows_the_newest_child_and_a_new_server_forgets_the_old_one() -> None:
    watch = ChildWatch()
    second_server, third_server = [i for i, line in enumerate(LOG) if "Listening on" in line][1:]
    for line in LOG[:second_server]:
        watch.feed(line)
    state = watch.state
    assert state.command.port == 35195 and state.load_s == 5.68 and state.version == "0.32.15"
    assert state.server_lines == second_server
    watch.mark_gone(state.generation, "it stopped answering")
    assert watch.state.gone == "it stopped answering" and watch.state.command.port == 35195
    watch.feed(LOG[second_server])  # `Listening on …`: another `ollama serve`
    assert watch.state.command is None and watch.state.gone == "" and watch.state.generation > state.generation
    for line in LOG[second_server + 1:third_server]:
        watch.feed(line)
    assert watch.state.command.port == 32937 and watch.state.load_s == 2.07


def test_a_load_that_fails_is_logged_and_the_child_is_gone_at_once() -> None:
    watch = ChildWatch()
    third_server = [i for i, line in enumerate(LOG) if "Listening on" in line][2]
    for line in LOG[third_server:]:  # q8_0 KV with flash attention off: llama.cpp refuses, the child exits
        watch.feed(line)
    state = watch.state
    assert state.command.port == 43703 and state.command.flash_attn == "off" and state.load_s is None
    assert state.gone.startswith("llama-server on port 43703 terminated (exit status 1) at 2026-12-01T13:59:31.769Z")
    assert "its load failed or it crashed" in state.gone


def test_a_stale_report_of_an_old_child_does_not_mark_the_new_one_gone() -> None:
    watch = ChildWatch()
    starts = [line for line in LOG if 'msg="starting llama-server"' in line]
    watch.feed(starts[0])
    old = watch.state.generation
    watch.feed(starts[1])
    watch.mark_gone(old, "the old child went away")
    assert watch.state.gone == "" and watch.state.command.port == 32937


def test_llama_server_lines_the_apps_own_notes_and_request_lines_are_not_events() -> None:
    watch = ChildWatch()
    llama_own = [line for line in LOG if not line.startswith(("time=", "[GIN]"))]
    gin = [line for line in LOG if line.startswith("[GIN]")]
    assert llama_own and gin and events(llama_own + gin) == []
    watch.feed(f"{MARK}journalctl stopped (exit 1).")
    assert watch.state.server_lines == 0  # the app's note is not a line of the server's log
    watch.feed(gin[0])
    assert watch.state.server_lines == 1 and watch.state.command is None


def test_a_model_path_with_spaces_stays_whole_and_short_flags_are_read() -> None:
    command = parse_command("/opt/My Apps/lib/ollama/llama-server -m /home/a b/model file.gguf --port 5001 -c 8192 "
                            "-np 4 -fa -ctk q4_0 -ctv q8_0 -ngl 20 --keep -1")
    assert command.program == "/opt/My Apps/lib/ollama/llama-server"
    assert command.model == "/home/a b/model file.gguf" and command.port == 5001
    assert command.context_per_slot == 2048 and command.flash_attn == "on" and command.gpu_layers == "20"
    assert command.cache_types == ("q4_0", "q8_0") and command.options["--keep"] == "-1"
    assert command.text.startswith("'/opt/My Apps/lib/ollama/llama-server' -m '/home/a b/model file.gguf'")


def test_a_starting_line_without_a_port_is_not_a_serving_child() -> None:
    line = 'time=2026-12-01T13:58:06.073Z level=INFO source=x.go:1 msg="starting llama-server" cmd="/x/llama-server --list-devices"'
    assert parse_log_line(line) is None
    assert parse_command("") is None and parse_command("--port 3") is None


def test_versions_before_0_30_run_no_llama_server() -> None:
    assert runs_llama_server("0.32.15") and runs_llama_server("1.0.0") and runs_llama_server("v0.30.0")
    assert runs_llama_server("0.12.6") is False and runs_llama_server("0.29.9") is False
    assert runs_llama_server("unknown") is None


def test_each_address_has_its_own_watch() -> None:
    children = ChildWatches()
    assert children.watch("http://127.0.0.1:11434/") is children.watch("http://127.0.0.1:11434")
    assert children.watch("http://127.0.0.1:11435") is not children.watch("http://127.0.0.1:11434")


def test_the_childs_recorded_slots_read_as_busy_then_idle() -> None:
    idle, _ = parse_slots(json.loads((DATA / "child_slots_idle.json").read_text()))
    busy, skipped = parse_slots(json.loads((DATA / "child_slots_busy.json").read_text()))
    after, _ = parse_slots(json.loads((DATA / "child_slots_after.json").read_text()))
    assert [s.busy for s in idle] == [False, False] and all(s.n_ctx == 1024 for s in idle) and skipped == 0
    assert [s.busy for s in busy] == [False, True]
    slot = busy[1]
    assert (slot.prompt_tokens, slot.prompt_processed, slot.cached_tokens) == (26, 18, 0) and slot.decoded >= 8
    assert not any(s.busy for s in after)


def line_never_breaks_the_parser(line: str) -> None:
    """The property: any text is either an event or None, and feeding it never raises."""
    event = parse_log_line(line)
    assert event is None or event.kind in ("starting", "started", "terminated", "listening")
    ChildWatch().feed(line)


@settings(max_examples=150, deadline=None)
@given(st.one_of(st.text(max_size=300),
                 st.builds(lambda body: 'time=x level=INFO msg="starting llama-server" cmd="' + body,
                           st.text(max_size=200))))
def test_fuzzed_lines_never_break_the_parser(line: str) -> None:
    line_never_breaks_the_parser(line)


def test_the_process_table_names_the_child_where_the_log_does_not() -> None:
    watch = ChildWatch()
    old = command_from_argv(["/usr/lib/ollama/llama-server", "--model", "/m/a b.gguf", "--port", "41001", "-np", "2"])
    new = command_from_argv(["/usr/lib/ollama/llama-server", "--model", "/m/a b.gguf", "--port", "41002", "-np", "4"])
    assert old.model == "/m/a b.gguf" and old.text.startswith("/usr/lib/ollama/llama-server --model '/m/a b.gguf'")
    watch.saw_processes([])
    assert watch.state.scanned and watch.state.command is None and watch.state.gone == ""
    watch.saw_processes([(101, old), (102, new)])  # two children (two models): the newest is followed
    first = watch.state
    assert (first.command.port, first.pid, first.logged_at) == (41002, 102, "")
    watch.saw_processes([(101, old), (102, new)])
    assert watch.state.generation == first.generation  # the same child: its counters go on
    watch.saw_processes([(101, old)])  # the newest is gone: the other one is now the child
    assert (watch.state.command.port, watch.state.pid) == (41001, 101) and watch.state.generation > first.generation
    watch.saw_processes([])
    assert watch.state.gone.startswith("llama-server (pid 101, port 41001) is no longer among Ollama's processes")


def test_a_child_the_log_just_named_is_not_replaced_before_its_process_shows() -> None:
    watch = ChildWatch()
    watch.feed(next(line for line in LOG if 'msg="starting llama-server"' in line))
    stale = command_from_argv(["/x/llama-server", "--port", "41001"])
    watch.saw_processes([(101, stale)])  # a scan an instant before the new child's process exists
    assert watch.state.command.port == 35195 and watch.state.gone == ""
    logged = watch.state.command
    watch.saw_processes([(101, stale), (202, logged)])
    assert (watch.state.command.port, watch.state.pid) == (35195, 202)  # the logged child, now with its pid
