"""Server records and how a later start judges them, against real processes: a stale record, a pid
that now belongs to another process, a live app's server, leftovers of a killed group."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from app.adapters.process import managed as managed_module
from app.adapters.process import orphans
from app.adapters.process.managed import ManagedServer
from app.adapters.process.orphans import Verdict
from app.adapters.process.runtime_record import RecordBook, ServerRecord
from app.adapters.storage import paths
from tests.fakes.ollama.app_like_parent import is_gone, wait_gone
from tests.fakes.ollama.server_fixtures import free_port

SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]


@pytest.fixture
def sleeper():
    """An unrelated process (not a server of ours) the test can point a record at."""
    process = subprocess.Popen(SLEEPER)
    yield process
    process.kill()
    process.wait(10)


@pytest.fixture
def dead_app() -> tuple[int, float]:
    """The pid and start time of an app process that has exited."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    created = psutil.Process(process.pid).create_time()
    process.wait(10)
    return process.pid, created


def record_of(pid: int, app: tuple[int, float], port: int = 11434, **changes: object) -> ServerRecord:
    """A record naming pid as a server started by app on 127.0.0.1:port."""
    proc = psutil.Process(pid)
    record = ServerRecord(
        backend="ollama", pid=pid, create_time=proc.create_time(), cmdline=tuple(proc.cmdline()),
        host="127.0.0.1", port=port, base_url=f"http://127.0.0.1:{port}", app_pid=app[0],
        app_create_time=app[1], started_at=time.time(), dies_with_app=False)
    return dataclasses.replace(record, **changes)


def test_a_record_survives_the_round_trip_and_a_broken_file_is_dropped(tmp_path, sleeper, dead_app):
    book = RecordBook(tmp_path / "run")
    record = record_of(sleeper.pid, dead_app)
    assert book.write(record)
    assert book.load_all() == [record]
    assert json.loads(book.path_for(record).read_text())["cmdline"] == list(record.cmdline)
    (tmp_path / "run" / "server-ollama-1.json").write_text("{not json")
    (tmp_path / "run" / "server-ollama-2.json").write_text(json.dumps({"format": 1, "pid": 2}))
    assert book.load_all() == [record]
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == [book.path_for(record).name]
    book.remove(record)
    book.remove(record)  # already gone is fine
    assert book.load_all() == []


def test_an_unwritable_folder_means_no_record_not_an_error(tmp_path, sleeper, dead_app):
    (tmp_path / "file").write_text("")
    book = RecordBook(tmp_path / "file" / "run")  # a folder below a file cannot be made
    assert not book.write(record_of(sleeper.pid, dead_app))
    assert book.load_all() == []


def test_a_stale_record_is_removed_silently(tmp_path, dead_app):
    book = RecordBook(tmp_path)
    process = subprocess.Popen(SLEEPER)
    book.write(record_of(process.pid, dead_app))
    process.kill()
    process.wait(10)

    survey = orphans.survey(book, "ollama", "127.0.0.1", 11434)

    assert survey.orphan is None and survey.removed == 1 and survey.reaped == ()
    assert book.load_all() == []


def test_a_reused_pid_is_never_signalled_and_its_record_is_removed(tmp_path, sleeper, dead_app):
    book = RecordBook(tmp_path)
    wrong_start = record_of(sleeper.pid, dead_app, create_time=psutil.Process(sleeper.pid).create_time() - 120)
    assert orphans.inspect(wrong_start).verdict is Verdict.REUSED
    book.write(wrong_start)

    survey = orphans.survey(book, "ollama", "127.0.0.1", 11434)

    assert survey.orphan is None and survey.removed == 1 and book.load_all() == []
    assert sleeper.poll() is None and not is_gone(sleeper.pid)  # still running: nothing was sent


def test_a_pid_running_another_command_is_not_an_orphan(tmp_path, sleeper, dead_app):
    other_command = record_of(sleeper.pid, dead_app, cmdline=("/usr/bin/ollama", "serve"))
    assert orphans.inspect(other_command).verdict is Verdict.REUSED
    book = RecordBook(tmp_path)
    book.write(other_command)
    assert orphans.survey(book, "ollama", "127.0.0.1", 11434).orphan is None
    assert sleeper.poll() is None and book.load_all() == []


def test_a_live_apps_server_is_left_alone(tmp_path, sleeper):
    book = RecordBook(tmp_path)
    me = (os.getpid(), psutil.Process().create_time())
    record = record_of(sleeper.pid, me)
    book.write(record)
    assert orphans.inspect(record).verdict is Verdict.OWNED
    survey = orphans.survey(book, "ollama", "127.0.0.1", 11434)
    assert survey.orphan is None and survey.removed == 0 and book.load_all() == [record]


def test_an_orphan_is_found_only_for_its_own_address(tmp_path, sleeper, dead_app):
    book = RecordBook(tmp_path)
    record = record_of(sleeper.pid, dead_app, port=11500)
    book.write(record)
    here = orphans.survey(book, "ollama", "127.0.0.1", 11500)
    assert here.orphan is not None and here.orphan.verdict is Verdict.ORPHAN and here.orphan.server.pid == sleeper.pid
    elsewhere = orphans.survey(book, "ollama", "127.0.0.1", 11501)
    assert elsewhere.orphan is None and [i.record for i in elsewhere.elsewhere] == [record]
    assert orphans.survey(book, "llama-server", "127.0.0.1", 11500).orphan is None
    assert book.load_all() == [record] and sleeper.poll() is None  # orphans are kept until stopped


@pytest.mark.skipif(not hasattr(os, "getpgid"), reason="process groups are POSIX")
def test_leftovers_of_a_gone_leader_are_stopped(tmp_path, dead_app):
    # A session leader that starts a child and exits at once, as a SIGKILLed server leaves a runner.
    leader = subprocess.Popen(
        [sys.executable, "-c", "import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', "
         "'import time; time.sleep(60)']); print(p.pid, flush=True)"],
        stdout=subprocess.PIPE, text=True, start_new_session=True)
    leader_started = psutil.Process(leader.pid).create_time()
    child = int(leader.stdout.readline())
    leader.wait(10)
    book = RecordBook(tmp_path)
    book.write(ServerRecord("ollama", leader.pid, leader_started, ("x",), "127.0.0.1", 11434,
                            "http://127.0.0.1:11434", dead_app[0], dead_app[1], time.time(), False))
    try:
        survey = orphans.survey(book, "ollama", "127.0.0.1", 11434, grace_s=2.0)
        assert survey.reaped == (child,) and survey.orphan is None
        assert wait_gone([child]) == [] and book.load_all() == []
    finally:
        if not is_gone(child):
            psutil.Process(child).kill()


def test_without_a_parent_death_signal_the_spawn_still_works(tmp_path, monkeypatch, standin_ollama):
    monkeypatch.setattr(managed_module, "_PRCTL", None)  # as on macOS or Windows
    assert managed_module.parent_death_hook() is None
    book = RecordBook(tmp_path / "run")
    port = free_port()
    env = dict(os.environ, OLLAMA_HOST=f"127.0.0.1:{port}")
    lines: list[str] = []

    async def spawn_and_stop() -> tuple[list[ServerRecord], int]:
        server = await ManagedServer.spawn(str(standin_ollama), env, lines.append, book=book,
                                           endpoint=("ollama", "127.0.0.1", port, f"http://127.0.0.1:{port}"))
        written = book.load_all()
        return written, await server.terminate(5.0)

    written, code = asyncio.run(spawn_and_stop())
    assert [(r.port, r.dies_with_app) for r in written] == [(port, False)]  # recorded, not armed
    assert code in (0, -signal.SIGTERM) and book.load_all() == []  # SIGTERM may come before its handler


def test_the_runtime_folder_follows_the_config_override(tmp_path, monkeypatch):
    assert paths.runtime_dir(tmp_path) == tmp_path / "run"
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    if sys.platform.startswith("linux"):
        assert paths.runtime_dir() == tmp_path / "state" / paths.APP_NAME / "run"
    assert paths.runtime_dir().name == "run"


def test_the_orphan_message_names_pid_start_address_and_log(sleeper, dead_app):
    record = record_of(sleeper.pid, dead_app, create_time=time.mktime((2026, 11, 30, 14, 2, 0, 0, 0, -1)))
    text = orphans.orphan_message("An `ollama serve`", record)
    assert text.startswith(f"An `ollama serve` that ollama-deck started earlier (pid {sleeper.pid}, since 2026-11-30 14:02)")
    assert "http://127.0.0.1:11434" in text and "log is not available" in text
    with_log = orphans.orphan_message("An `ollama serve`", dataclasses.replace(record, log_path="/x/server.log"))
    assert "Its log is read from /x/server.log." in with_log
    assert orphans.since_text(record.create_time, now_s=record.create_time + 60) == "14:02"


# A launcher script as distributions ship them: it waits for the test's word, then `exec`s the real program,
# which listens on the port, says so through a second pipe and keeps serving.
LAUNCHER = """#!/bin/sh
read go < "$1"
exec "{python}" -c "{program}" "$2" "$3"
"""
SERVER = ("import socket, sys, time; s = socket.socket(); s.bind(('127.0.0.1', int(sys.argv[2]))); s.listen(); "
          "open(sys.argv[1], 'w').write('ready\\n'); time.sleep(60)")


def test_a_server_whose_launcher_execd_the_real_program_is_still_recognised(tmp_path, dead_app):
    launcher = tmp_path / "ollama"
    launcher.write_text(LAUNCHER.format(python=sys.executable, program=SERVER))
    launcher.chmod(0o755)
    go, ready = tmp_path / "go", tmp_path / "ready"
    os.mkfifo(go)
    os.mkfifo(ready)
    book = RecordBook(tmp_path / "run")
    port = free_port()

    async def scenario() -> tuple[ServerRecord, orphans.Survey, int]:
        server = await ManagedServer.spawn(str(launcher), dict(os.environ), lambda _line: None, book=book,
                                           endpoint=("ollama", "127.0.0.1", port, f"http://127.0.0.1:{port}"),
                                           args=(str(go), str(ready), str(port)))
        try:
            [record] = book.load_all()
            await asyncio.to_thread(go.write_text, "go\n")
            assert await asyncio.to_thread(ready.read_text) == "ready\n"  # the real program runs, listening
            assert psutil.Process(server.pid).cmdline()[0] == sys.executable  # under the launcher's pid
            left = dataclasses.replace(record, app_pid=dead_app[0], app_create_time=dead_app[1])  # its app is gone
            book.write(left)
            return record, await asyncio.to_thread(orphans.survey, book, "ollama", "127.0.0.1", port), server.pid
        finally:
            await server.terminate(5.0)

    record, survey, pid = asyncio.run(scenario())
    assert record.cmdline[-3:] == (str(go), str(ready), str(port)) and record.cmdline[-4] == str(launcher)
    assert survey.orphan is not None and survey.orphan.server is not None and survey.orphan.server.pid == pid
    assert survey.removed == 0
