"""Following an attached server's own log: a real file (the desktop app's) and a journalctl
stand-in (journald cannot run here) as real subprocesses, on the app's kind of loop thread."""

from __future__ import annotations

import sys
from pathlib import Path

import psutil

from app.adapters.process import attached_log
from app.adapters.process import procs as procs
from app.adapters.process.attached_log import MARK, follow_file, follow_journal, follower_for
from app.core.server.state import ExternalKind, ServerState
from app.core.server.settings import ServerSettings
from tests.fakes.ollama.server_fixtures import WAIT_S, LogRecorder, is_gone

JOURNALCTL = """#!{python}
import os, sys, time
open({pidfile!r}, "w").write(str(os.getpid()))
print("ARGS " + " ".join(sys.argv[1:]), flush=True)
if {denied!r}:
    print("No journal files were opened due to insufficient permissions.", flush=True)
    sys.exit(1)
for i in range(3):
    print(f"time=2026-11-30T01:00:0{{i}} level=INFO source=routes.go msg=\\"journal line {{i}}\\"", flush=True)
while True:  # --follow: runs until it is killed
    time.sleep(1)
"""


def fake_journalctl(tmp_path: Path, denied: bool = False) -> tuple[Path, Path]:
    script, pidfile = tmp_path / "journalctl", tmp_path / "journalctl.pid"
    script.write_text(JOURNALCTL.format(python=sys.executable, pidfile=str(pidfile), denied=denied))
    script.chmod(0o755)
    return script, pidfile


def journal_pid(pidfile: Path) -> int:
    return int(pidfile.read_text())


def test_the_journal_is_followed_from_its_last_lines_and_journalctl_ends_with_the_follower(
        supervisor_loop, tmp_path) -> None:
    script, pidfile = fake_journalctl(tmp_path)
    lines = LogRecorder()
    future = supervisor_loop.submit(follow_journal(lines, "ollama.service", str(script)))
    lines.wait_for("journal line 2")
    args = lines.wait_for("ARGS")
    assert "--unit ollama.service" in args and "--follow" in args and "--output cat" in args and "--lines 200" in args
    journal = psutil.Process(journal_pid(pidfile))
    assert not is_gone(journal.pid)
    future.cancel()
    journal.wait(WAIT_S)  # killed when the follower is cancelled, not left behind
    assert not any(MARK in line for line in lines.lines)


def test_a_journal_that_cannot_be_read_says_which_group_gives_access(supervisor_loop, tmp_path) -> None:
    script, _pidfile = fake_journalctl(tmp_path, denied=True)
    lines = LogRecorder()
    supervisor_loop.run(follow_journal(lines, "ollama.service", str(script)), timeout=WAIT_S)
    assert "insufficient permissions" in lines.lines[1]
    assert "exit 1" in lines.lines[-1] and "systemd-journal" in lines.lines[-1] and lines.lines[-1].startswith(MARK)


def test_no_journalctl_is_said_once(supervisor_loop, monkeypatch) -> None:
    monkeypatch.setattr(attached_log.shutil, "which", lambda _name: None)
    lines = LogRecorder()
    supervisor_loop.run(follow_journal(lines), timeout=WAIT_S)
    assert lines.lines == [f"{MARK}journalctl is not on this system, so the service's log cannot be followed here."]


def test_the_desktop_apps_log_file_is_followed_through_appends_and_rotation(supervisor_loop, tmp_path) -> None:
    log = tmp_path / "server.log"
    log.write_text("".join(f"old line {i}\n" for i in range(250)) + "half a li")
    lines = LogRecorder()
    future = supervisor_loop.submit(follow_file(lines, log, poll_s=0.02))
    lines.wait_for("old line 249")
    assert lines.lines[0] == "old line 50" and len(lines.lines) == 200  # the last 200 complete lines
    with log.open("a") as f:
        f.write("ne, finished\nnew line\n")
    lines.wait_for("new line")
    assert "half a line, finished" in lines.lines  # a line being written when following began comes whole
    log.rename(tmp_path / "server-1.log")  # the app rotates: a new file takes the name
    log.write_text("after rotation\n")
    lines.wait_for("after rotation")
    assert any("rotated or truncated" in line for line in lines.lines)
    future.cancel()


def test_a_missing_log_file_is_waited_for(supervisor_loop, tmp_path) -> None:
    log = tmp_path / "logs" / "server.log"
    lines = LogRecorder()
    future = supervisor_loop.submit(follow_file(lines, log, poll_s=0.02))
    lines.wait_for("Waiting for")
    log.parent.mkdir()
    log.write_text("first words\n")
    lines.wait_for("first words")
    assert sum("Waiting for" in line for line in lines.lines) == 1
    future.cancel()


def test_which_log_each_kind_of_server_has() -> None:
    assert follower_for(ExternalKind.SYSTEMD) is not None
    assert follower_for(ExternalKind.TRAY_APP) is not None
    assert follower_for(ExternalKind.OTHER) is None  # a terminal's server writes to that terminal


def test_an_attached_systemd_server_has_its_journal_in_the_log_until_it_goes_away(
        make_supervisor, external_standin, standin_ollama, tmp_path, monkeypatch) -> None:
    script, pidfile = fake_journalctl(tmp_path)
    monkeypatch.setattr(procs, "external_kind_of", lambda _pid, _server: ExternalKind.SYSTEMD)
    ext = external_standin()
    h = make_supervisor(ServerSettings(port=ext.port),
                        log_follower_for=lambda kind: follower_for(kind, journalctl=str(script)))
    assert h.run(h.supervisor.probe()).external_kind is ExternalKind.SYSTEMD
    h.logs.wait_for("journal line 2")
    journal = psutil.Process(journal_pid(pidfile))
    assert h.run(h.supervisor.probe()).state is ServerState.RUNNING_ATTACHED  # probing again keeps it
    assert journal_pid(pidfile) == journal.pid and sum("journal line 0" in x for x in h.logs.lines) == 1
    ext.terminate()
    h.statuses.wait_for(ServerState.STOPPED)
    journal.wait(WAIT_S)  # the follower stopped with the server


def test_who_runs_an_attached_ollama_is_said_in_its_words(make_supervisor, external_standin, standin_ollama,
                                                           monkeypatch) -> None:
    monkeypatch.setattr(procs, "external_kind_of", lambda _pid, _server: ExternalKind.TRAY_APP)
    ext = external_standin()
    h = make_supervisor(ServerSettings(port=ext.port), log_follower_for=lambda _kind: None)
    status = h.run(h.supervisor.probe())
    assert status.external_kind is ExternalKind.TRAY_APP and status.run_by == "Ollama desktop app"
    assert "run by Ollama desktop app." in status.message
    assert status.stop_disabled_reason.startswith("This server was started by Ollama desktop app;")
    assert "Quit the Ollama desktop app" in status.apply_hint


def test_the_follower_is_cancelled_on_close(make_supervisor, external_standin, standin_ollama, tmp_path,
                                            monkeypatch) -> None:
    script, pidfile = fake_journalctl(tmp_path)
    monkeypatch.setattr(procs, "external_kind_of", lambda _pid, _server: ExternalKind.SYSTEMD)
    ext = external_standin()
    h = make_supervisor(ServerSettings(port=ext.port),
                        log_follower_for=lambda kind: follower_for(kind, journalctl=str(script)))
    h.run(h.supervisor.probe())
    h.logs.wait_for("journal line 0")
    journal = psutil.Process(journal_pid(pidfile))
    h.run(h.supervisor.close())
    journal.wait(WAIT_S)
    assert ext.process.poll() is None  # the server itself is never touched
