"""The llama-server that Ollama 0.30 and later runs as its child, as Ollama's own log describes it.

Ollama starts llama-server on a random local port whenever it loads a model and logs the command
line (`msg="starting llama-server" cmd="…/llama-server --model … --port 44117 … -c 2048 -np 2 …"`),
then `msg="llama-server started in 1.78 seconds"`. A load that fails is logged as
`msg="llama-server terminated" error="exit status 1"`; an unload, a keep-alive running out or a
running child killed is not logged at all: that is seen when the port stops answering. These lines are the only
way to find the child's port, so a ChildWatch per Ollama address is fed every log line the
supervisor reads (a managed server's output file, or an attached server's journal or log file),
and the slot reader (child_telemetry.py) asks it where the child is now. For an attached server the
process table is read too (child_processes.py): the child's own command line names its port where
the log is out of reach.

The parsers never raise on what a log holds: a line that is not one of these is None."""

from __future__ import annotations

import json
import re
import shlex
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from app.adapters.process.attached_log import MARK

STARTING = "starting llama-server"
TERMINATED = "llama-server terminated"  # logged at ERROR when a load fails (not when a running child is killed)
_STARTED = re.compile(r"^llama-server started in ([0-9.]+) seconds$")
_LISTENING = re.compile(r"^Listening on (\S+) \(version ([^)]+)\)$")
LOG_GRACE_S = 10.0  # a child the log just named may not be in the process table yet
FIRST_CHILD_VERSION = (0, 30)  # from 0.30 Ollama runs llama.cpp's own llama-server (ollama-facts.md, era C)

# llama-server's flags that matter here, every spelling -> the long name kept.
FLAG_NAMES = {
    "-m": "--model", "--model": "--model", "--port": "--port", "--host": "--host",
    "-c": "--ctx-size", "--ctx-size": "--ctx-size", "-np": "--parallel", "--parallel": "--parallel",
    "-b": "--batch-size", "--batch-size": "--batch-size", "-ub": "--ubatch-size", "--ubatch-size": "--ubatch-size",
    "-fa": "--flash-attn", "--flash-attn": "--flash-attn",
    "-ctk": "--cache-type-k", "--cache-type-k": "--cache-type-k",
    "-ctv": "--cache-type-v", "--cache-type-v": "--cache-type-v",
    "-ngl": "--gpu-layers", "--gpu-layers": "--gpu-layers", "--n-gpu-layers": "--gpu-layers",
    "-t": "--threads", "--threads": "--threads",
}
_FLAG = re.compile(r"^--?[A-Za-z][A-Za-z0-9-]*$")  # "-1" is a value, "-np" a flag


def slog_fields(line: str) -> dict[str, str] | None:
    """The key=value pairs of one Go slog text line (`time=… level=INFO … msg="…"`), quoted values
    unescaped; None when the line is not one (llama-server's own lines, [GIN] request lines)."""
    if not line.startswith("time="):
        return None
    fields: dict[str, str] = {}
    i, n = 0, len(line)
    while i < n:
        while i < n and line[i] == " ":
            i += 1
        eq = line.find("=", i)
        if eq <= i:
            break
        key = line[i:eq]
        i = eq + 1
        if i < n and line[i] == '"':
            j = i + 1
            while j < n and line[j] != '"':
                j += 2 if line[j] == "\\" else 1
            raw = line[i:j + 1]
            try:
                value = json.loads(raw)  # Go's strconv.Quote is JSON's string syntax for what is logged here
            except ValueError:
                value = raw[1:-1].replace('\\"', '"').replace("\\\\", "\\")
            fields[key] = str(value)
            i = j + 1
        else:
            j = line.find(" ", i)
            j = n if j < 0 else j
            fields[key] = line[i:j]
            i = j
    return fields if "msg" in fields else None


@dataclass(frozen=True)
class ChildCommand:
    """llama-server's command line as Ollama logged it: the words, and the flags read from them."""

    argv: tuple[str, ...]
    options: Mapping[str, str | None]  # long flag name -> value (None: a flag without one)

    def _int(self, name: str) -> int | None:
        value = self.options.get(name)
        try:
            return None if value is None else int(value)
        except ValueError:
            return None

    @property
    def program(self) -> str:
        """The llama-server program Ollama ran."""
        return self.argv[0]

    @property
    def model(self) -> str:
        """--model: the GGUF file (a blob in Ollama's store)."""
        return self.options.get("--model") or ""

    @property
    def port(self) -> int | None:
        """The child's HTTP port (random at each load)."""
        return self._int("--port")

    @property
    def host(self) -> str:
        """The child's listening address (Ollama uses 127.0.0.1)."""
        return self.options.get("--host") or "127.0.0.1"

    @property
    def base_url(self) -> str:
        """http://host:port of the child."""
        host = self.host
        return f"http://[{host}]:{self.port}" if ":" in host else f"http://{host}:{self.port}"

    @property
    def context_total(self) -> int | None:
        """-c: the context of all slots together, tokens."""
        return self._int("--ctx-size")

    @property
    def parallel(self) -> int | None:
        """-np: slots decoded in parallel."""
        return self._int("--parallel")

    @property
    def context_per_slot(self) -> int | None:
        """-c / -np: the context of one slot, tokens."""
        total, parallel = self.context_total, self.parallel or 1
        return None if total is None else total // parallel

    @property
    def batch(self) -> int | None:
        """-b: the logical batch, tokens."""
        return self._int("--batch-size")

    @property
    def ubatch(self) -> int | None:
        """-ub: the physical batch, tokens."""
        return self._int("--ubatch-size")

    @property
    def flash_attn(self) -> str:
        """--flash-attn as given (auto/on/off); "on" for the bare flag, "" when absent."""
        if "--flash-attn" not in self.options:
            return ""
        return self.options["--flash-attn"] or "on"

    @property
    def cache_types(self) -> tuple[str, str]:
        """(K, V) cache types; f16 (llama.cpp's default) where not given."""
        return (self.options.get("--cache-type-k") or "f16", self.options.get("--cache-type-v") or "f16")

    @property
    def gpu_layers(self) -> str:
        """-ngl as given ("" when Ollama leaves it to llama.cpp's fit)."""
        return self.options.get("--gpu-layers") or ""

    @property
    def text(self) -> str:
        """The command as one shell line (paths with spaces quoted), to read or copy."""
        return shlex.join(self.argv)

    def summary(self) -> str:
        """The figures that decide memory and concurrency, e.g. "-np 2 · -c 2048 (1024 per slot) · …"."""
        parts = []
        if self.parallel is not None:
            parts.append(f"-np {self.parallel}")
        if self.context_total is not None:
            parts.append(f"-c {self.context_total} ({self.context_per_slot} per slot)")
        if self.batch is not None:
            parts.append(f"-b {self.batch}" + (f" -ub {self.ubatch}" if self.ubatch is not None else ""))
        if self.flash_attn:
            parts.append(f"flash-attn {self.flash_attn}")
        k, v = self.cache_types
        parts.append(f"KV {k}" if k == v else f"KV {k}/{v}")
        if self.gpu_layers:
            parts.append(f"-ngl {self.gpu_layers}")
        return " · ".join(parts)


def parse_command(cmd: str) -> ChildCommand | None:
    """The logged `cmd="…"` value as a ChildCommand; None when it names no port (not a serving child).

    Ollama joins the words with spaces without quoting, so a word that is not a flag belongs to the
    value before it: a model path with spaces stays whole."""
    words = cmd.split()
    first_flag = next((i for i, w in enumerate(words) if _FLAG.match(w)), len(words))
    if first_flag == 0:
        return None
    return _command(" ".join(words[:first_flag]), words[first_flag:])


def command_from_argv(argv: Sequence[str]) -> ChildCommand | None:
    """A running llama-server's own argv (from the process table, each word whole) as a ChildCommand."""
    return _command(argv[0], list(argv[1:])) if argv else None


def _command(program: str, words: list[str]) -> ChildCommand | None:
    argv = [program]
    options: dict[str, str | None] = {}
    i = 0
    while i < len(words):
        flag = words[i]
        j = i + 1
        while j < len(words) and not _FLAG.match(words[j]):
            j += 1
        value = " ".join(words[i + 1:j]) or None
        argv.append(flag)
        if value is not None:
            argv.append(value)
        options[FLAG_NAMES.get(flag, flag)] = value
        i = j
    command = ChildCommand(tuple(argv), options)
    return command if command.port is not None else None


@dataclass(frozen=True)
class LogEvent:
    """One line of Ollama's log that tells about its child: "starting", "started", "terminated" or
    "listening"."""

    kind: str
    logged_at: str = ""  # the line's own time= (Ollama's clock, RFC 3339)
    command: ChildCommand | None = None  # starting
    seconds: float | None = None  # started: how long the load took
    address: str = ""  # listening: Ollama's own host:port
    version: str = ""  # listening: Ollama's version
    error: str = ""  # terminated: how it ended, e.g. "exit status 1"


def parse_log_line(line: str) -> LogEvent | None:
    """The child-related event a log line holds, or None."""
    fields = slog_fields(line)
    if fields is None:
        return None
    msg, at = fields["msg"], fields.get("time", "")
    if msg == STARTING:
        command = parse_command(fields.get("cmd", ""))
        return LogEvent("starting", at, command=command) if command is not None else None
    if msg == TERMINATED:
        return LogEvent("terminated", at, error=fields.get("error", ""))
    started = _STARTED.match(msg)
    if started:
        return LogEvent("started", at, seconds=float(started.group(1)))
    listening = _LISTENING.match(msg)
    if listening:
        return LogEvent("listening", at, address=listening.group(1), version=listening.group(2))
    return None


def runs_llama_server(version: str) -> bool | None:
    """Whether an Ollama of this version runs llama-server as its child; None when unreadable."""
    numbers = re.match(r"^v?(\d+)\.(\d+)", version.strip())
    if numbers is None:
        return None
    return (int(numbers.group(1)), int(numbers.group(2))) >= FIRST_CHILD_VERSION


@dataclass(frozen=True)
class ChildState:
    """What the log (and, for an attached server, the process table) said so far about one Ollama's
    current llama-server."""

    command: ChildCommand | None = None  # from the newest starting line
    logged_at: str = ""  # that line's time=
    load_s: float | None = None  # from the first "started in" after it; None while loading
    generation: int = 0  # +1 per starting line: a reader sees a new child (new port, new counters)
    gone: str = ""  # why the child is known to be gone ("" while it may run)
    version: str = ""  # Ollama's, from its Listening line
    server_lines: int = 0  # lines of the server's own read so far (0: its log is not read at all)
    seen_at: float | None = None  # monotonic s when the starting line was read
    pid: int | None = None  # the child's, where the process table showed it
    scanned: bool = False  # the server's child processes are looked at (an attached server whose pid is known)


@dataclass
class ChildWatch:
    """Follows one Ollama's child through its log lines and process scans; fed on the loop thread,
    read by the slot reader."""

    _state: ChildState = field(default_factory=ChildState)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def state(self) -> ChildState:
        """The current snapshot."""
        with self._lock:
            return self._state

    def feed(self, line: str) -> LogEvent | None:
        """Read one log line of the server's; returns the event it held, if any."""
        if line.startswith(MARK):  # the app's own note (e.g. the journal cannot be read), not the server's
            return None
        event = parse_log_line(line)
        with self._lock:
            s = replace(self._state, server_lines=self._state.server_lines + 1)
            if event is not None and event.kind == "starting":
                s = replace(s, command=event.command, logged_at=event.logged_at, load_s=None,
                            generation=s.generation + 1, gone="", seen_at=time.monotonic())
            elif event is not None and event.kind == "started" and s.command is not None and s.load_s is None:
                s = replace(s, load_s=event.seconds)
            elif event is not None and event.kind == "terminated" and s.command is not None and not s.gone:
                s = replace(s, gone=f"llama-server on port {s.command.port} terminated ({event.error or 'no detail'}) "
                            f"at {event.logged_at}, as Ollama's log says: its load failed or it crashed; the Server "
                            "log shows llama.cpp's own reason just before, and the next load starts a new one")
            elif event is not None and event.kind == "listening":
                # A new `ollama serve`: whatever child the old one had is gone with it.
                s = ChildState(generation=s.generation + 1, version=event.version, server_lines=s.server_lines)
            self._state = s
        return event

    def mark_gone(self, generation: int, reason: str) -> None:
        """The child of `generation` stopped answering: keep its command, say why, stop asking it."""
        with self._lock:
            if self._state.generation == generation and not self._state.gone:
                self._state = replace(self._state, gone=reason)

    def saw_processes(self, children: Sequence[tuple[int, ChildCommand]]) -> None:
        """What the process table shows now: the server's llama-server children (pid, command), oldest
        first. A known child among them stays; otherwise the newest is the current child; a known child
        no longer there has exited (one the log named a moment ago may not have started yet)."""
        with self._lock:
            s = replace(self._state, scanned=True)
            current = s.command
            pids = {command.port: pid for pid, command in children}
            just_logged = bool(s.logged_at) and s.seen_at is not None and time.monotonic() - s.seen_at < LOG_GRACE_S
            if current is not None and not s.gone and current.port in pids:
                s = replace(s, pid=pids[current.port])
            elif current is not None and not s.gone and just_logged:
                pass
            elif children:
                pid, command = children[-1]
                s = replace(s, command=command, logged_at="", load_s=None, generation=s.generation + 1, gone="",
                            seen_at=time.monotonic(), pid=pid)
            elif current is not None and not s.gone:
                who = f"pid {s.pid}, " if s.pid else ""
                s = replace(s, gone=f"llama-server ({who}port {current.port}) is no longer among Ollama's "
                            "processes: Ollama unloaded the model or the child exited; its slots show again "
                            "when Ollama next loads a model")
            self._state = s

    def reset(self) -> None:
        """Forget everything (the server stopped, or another one is attached at this address)."""
        with self._lock:
            self._state = ChildState(generation=self._state.generation + 1)


class ChildWatches:
    """One ChildWatch per Ollama address (http://host:port), shared by the supervisor that feeds it
    and the slot reader that the backend's telemetry factory makes for the same address."""

    def __init__(self) -> None:
        self._watches: dict[str, ChildWatch] = {}
        self._lock = threading.Lock()

    def watch(self, base_url: str) -> ChildWatch:
        """The watch of the Ollama at base_url (made on first use)."""
        key = base_url.rstrip("/")
        with self._lock:
            return self._watches.setdefault(key, ChildWatch())


CHILDREN = ChildWatches()  # the app's: one supervisor and one telemetry poller per address

__all__ = ["CHILDREN", "ChildCommand", "ChildState", "ChildWatch", "ChildWatches", "LogEvent", "STARTING",
           "command_from_argv", "parse_command", "parse_log_line", "runs_llama_server", "slog_fields"]
