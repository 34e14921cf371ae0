"""`pip install` as a real subprocess on the asyncio loop: its log line by line, the phase it is in
(collecting, building a wheel, installing), and Cancel, which kills exactly the pip process tree it
started (its own session, so build tools that outlive their parent are found by group too)."""

from __future__ import annotations

import asyncio
import enum
import os
import re
import shlex
import signal
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import psutil

from app.adapters.process.install_step import InstallStep
from app.adapters.process.procs import alive, group_members, kill_and_wait, signal_all, tree_of

# Options every run gets: no progress bars (they redraw one line with carriage returns), and -v so the
# build backend's own output (CMake's compile lines) is streamed instead of a spinner.
BASE_PIP_OPTIONS = ("-v", "--progress-bar", "off")
LOG_TAIL_LINES = 40


class Phase(enum.Enum):
    """Where a pip run is, from the lines it prints."""

    STARTING = "starting"
    COLLECTING = "collecting"  # resolving, downloading, preparing metadata
    BUILDING = "building"  # building a wheel from source: the long part for llama.cpp
    INSTALLING = "installing"
    INSTALLED = "installed"


_PHASE_PREFIXES: tuple[tuple[str, Phase], ...] = (
    ("Collecting ", Phase.COLLECTING),
    ("Processing ", Phase.COLLECTING),
    ("Obtaining ", Phase.COLLECTING),
    ("Downloading ", Phase.COLLECTING),
    ("Building wheels for collected packages", Phase.BUILDING),
    ("Building wheel for ", Phase.BUILDING),
    ("Building editable for ", Phase.BUILDING),
    ("Installing collected packages", Phase.INSTALLING),
    ("Successfully installed", Phase.INSTALLED),
)
_BUILDING_WHAT = re.compile(r"Building (?:wheel|editable) for (\S+)")


def phase_of(line: str) -> Phase | None:
    """The phase a pip output line starts, or None for a line that changes nothing."""
    text = line.strip()
    for prefix, phase in _PHASE_PREFIXES:
        if text.startswith(prefix):
            return phase
    return None


def building_what(line: str) -> str:
    """The package a "Building wheel for X" line names ('' for other lines)."""
    match = _BUILDING_WHAT.search(line)
    return match.group(1) if match else ""


@dataclass(frozen=True)
class InstallProgress:
    """A phase change: which step of how many, the phase, and the package being built, if any."""

    step: int  # 0-based index of the running step
    steps: int
    label: str
    phase: Phase
    building: str = ""


class Outcome(enum.Enum):
    """How an install ended."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


@dataclass(frozen=True)
class InstallResult:
    """The end of an install: outcome, pip's exit code, a message for the user and pip's last lines."""

    outcome: Outcome
    returncode: int | None
    message: str
    log_tail: tuple[str, ...] = ()
    pid: int | None = None  # the pip process of the last step run
    elapsed_s: float = 0.0


class PipInstaller:
    """Runs steps one after another with `python -m pip install`; stops at the first that fails.

    Callbacks run on the asyncio loop thread (a Qt caller forwards them through queued signals)."""

    def __init__(self, steps: Sequence[InstallStep], python: str | None = None,
                 pip_options: Sequence[str] = (), env: dict[str, str] | None = None,
                 on_line: Callable[[str], None] | None = None,
                 on_progress: Callable[[InstallProgress], None] | None = None) -> None:
        self.steps = tuple(steps)
        self.python = python or sys.executable
        self.pip_options = tuple(pip_options)
        self.env = env
        self._on_line = on_line or (lambda line: None)
        self._on_progress = on_progress or (lambda progress: None)
        self._cancel: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._cancel_requested = False
        self.pid: int | None = None  # the running pip process, for messages

    def command(self, step: InstallStep) -> list[str]:
        """The argv of one step."""
        return [self.python, "-m", "pip", "install", *BASE_PIP_OPTIONS, *self.pip_options, *step.args]

    def command_text(self, step: InstallStep) -> str:
        """One step's command as a shell line (for the log and for users who prefer a terminal)."""
        return shlex.join(self.command(step))

    def cancel(self) -> None:
        """Ask the running install to stop (from any thread): its pip process tree is killed."""
        self._cancel_requested = True
        loop, event = self._loop, self._cancel
        if loop is not None and event is not None and not loop.is_closed():
            loop.call_soon_threadsafe(event.set)

    async def run(self) -> InstallResult:
        """Run every step (on the asyncio loop); the result says what happened."""
        self._loop = asyncio.get_running_loop()
        self._cancel = asyncio.Event()
        if self._cancel_requested:
            self._cancel.set()
        started = time.monotonic()
        result = InstallResult(Outcome.SUCCEEDED, 0, "Nothing to install.")
        for index, step in enumerate(self.steps):
            result = await self._run_step(index, step, started)
            if result.outcome is not Outcome.SUCCEEDED:
                return result
        done = ", ".join(step.label for step in self.steps)
        return InstallResult(Outcome.SUCCEEDED, 0, f"Installed {done} with {self.python}.", result.log_tail,
                             result.pid, time.monotonic() - started)

    async def _run_step(self, index: int, step: InstallStep, started: float) -> InstallResult:
        assert self._cancel is not None
        progress = InstallProgress(index, len(self.steps), step.label, Phase.STARTING)
        self._on_progress(progress)
        self._on_line(f"$ {self.command_text(step)}")
        env = dict(os.environ if self.env is None else self.env)
        env["PYTHONUNBUFFERED"] = "1"  # pip's lines arrive as it prints them, not per 8 KiB
        try:
            proc = await asyncio.create_subprocess_exec(
                *self.command(step), stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT, env=env, start_new_session=True)
        except OSError as exc:
            return InstallResult(Outcome.FAILED, None, f"Could not start {self.python} -m pip: {exc}.")
        self.pid = proc.pid
        tail: deque[str] = deque(maxlen=LOG_TAIL_LINES)
        reader = asyncio.ensure_future(self._read(proc, index, step, tail))
        cancel_wait = asyncio.ensure_future(self._cancel.wait())
        killed = False
        stubborn: list[psutil.Process] = []
        try:
            await asyncio.wait({reader, cancel_wait}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not reader.done():  # Cancel, or this task itself was cancelled: pip's tree goes first
                killed = True
                stubborn = await stop_tree(proc.pid)
                reader.cancel()
                await asyncio.gather(reader, return_exceptions=True)
                await proc.wait()
            cancel_wait.cancel()
        elapsed = time.monotonic() - started
        if killed:
            left = (f" {len(stubborn)} of them would not stop: pids {', '.join(str(p.pid) for p in stubborn)}."
                    if stubborn else "")
            return InstallResult(
                Outcome.CANCELLED, proc.returncode,
                f"Cancelled during {step.label}: pip (pid {proc.pid}) and the processes it started were "
                f"stopped.{left} Steps already finished stay installed; run the install again to finish.",
                tuple(tail), proc.pid, elapsed)
        returncode = await proc.wait()
        if returncode == 0:
            return InstallResult(Outcome.SUCCEEDED, 0, f"Installed {step.label}.", tuple(tail), proc.pid, elapsed)
        errors = [line for line in tail if line.startswith("ERROR:") or line.startswith("error:")]
        shown = " ".join(errors[-3:]) if errors else (tail[-1] if tail else "no output")
        return InstallResult(
            Outcome.FAILED, returncode,
            f"pip failed installing {step.label} (exit code {returncode}): {shown} "
            f"The full log is above; the command was: {self.command_text(step)}",
            tuple(tail), proc.pid, elapsed)

    async def _read(self, proc: asyncio.subprocess.Process, index: int, step: InstallStep,
                    tail: deque[str]) -> None:
        assert proc.stdout is not None
        phase = Phase.STARTING
        while True:
            raw = await proc.stdout.readline()
            if not raw:
                break
            line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            tail.append(line)
            self._on_line(line)
            new = phase_of(line)
            building = building_what(line)
            if new is not None and (new is not phase or building):
                phase = new
                self._on_progress(InstallProgress(index, len(self.steps), step.label, phase, building))
        await proc.wait()


async def stop_tree(pid: int, timeout_s: float = 5.0) -> list[psutil.Process]:
    """Kill pip (pid) and everything it started; returns the processes still alive afterwards.

    The descendants die first, so pip, still alive, reaps its own children as they exit; then pip
    and whatever is left in its process group (it leads its own session)."""
    try:
        root = psutil.Process(pid)
        since = root.create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return []
    descendants = [proc for proc in tree_of(root) if proc.pid != pid]
    descendants += [proc for proc in group_members(pid, since) if proc not in descendants]
    children = [proc for proc in descendants if _parent_pid(proc) == pid]
    remaining = await kill_and_wait(descendants, timeout_s)
    # pip reaps its own children as soon as they die: give it that moment, so none is handed to init
    # as a zombie when pip goes too.
    deadline = time.monotonic() + 1.0
    while any(_parent_pid(child) == pid for child in children) and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    signal_all([root], signal.SIGKILL)
    remaining += await kill_and_wait(group_members(pid, since), timeout_s)
    return alive(remaining)


def _parent_pid(proc: psutil.Process) -> int | None:
    """The parent's pid, None once the process is gone (reaped)."""
    try:
        parent: int = proc.ppid()
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None
    return parent
