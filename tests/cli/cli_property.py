"""The command-line property the fuzz tests check, and the argv generator, as plain functions a longer
run can reuse (benchmarks/fuzz_inputs.py runs thousands of examples with them).

Argv lists come from each command's real parser: every option it has (parser._actions), values from
numbers (nan, inf, huge, negative, fractions), text (unicode, empty, raw bytes the shell could not
decode), real paths (a show reply, a binary file, a folder, missing ones) and the option's own choices,
in any order, written `--opt value` or `--opt=value`. The URL is always one that refuses connections
(or text the URL parser refuses), so a run that would measure fails at once instead of waiting.

Property: any argv given to `estimate`, `prompt`, `bench` or `exporter` ends with an exit code in {0, 1, 2, 130},
never an uncaught exception or a traceback, and exit 2 comes with exactly one stderr line that
starts with the command's name and says what is wrong. A command that serves until a signal (`exporter`) is sent
SIGTERM once it says it serves, as a user ends it.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import os
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

from hypothesis import strategies as st

from app.cli import SUBCOMMANDS, OneLineParser, main
from app.core.server.url import ServerUrlError, parse_server_url
from tests.fakes.raw_http import closed_port

EXIT_CODES = {0, 1, 2, 130}


SERVING = "Serving Prometheus metrics at"  # the exporter's line once it serves (until a signal)


@contextlib.contextmanager
def ended_once_serving(out: io.StringIO) -> Iterator[None]:
    """SIGTERM this process once `out` holds the exporter's serving line (its handler then stops it, as it stops
    on a user's `kill`); nothing when the command ends without serving."""
    done = threading.Event()

    def watch() -> None:
        while not done.wait(0.05):
            if SERVING in out.getvalue():
                os.kill(os.getpid(), signal.SIGTERM)
                return

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()


def invoke(argv: list[str], stdin: str = "a prompt from stdin\n") -> tuple[int, str, str]:
    """Run `ollama-deck ARGV` in this process: (exit code, stdout, stderr); exceptions propagate."""
    out, err = io.StringIO(), io.StringIO()
    saved_stdin = sys.stdin
    sys.stdin = io.StringIO(stdin)
    serving = ended_once_serving(out) if argv[:1] == ["exporter"] else contextlib.nullcontext()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), serving:
            try:
                code = main(list(argv))
            except SystemExit as exc:  # argparse: --help (0) and its own errors (2)
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    finally:
        sys.stdin = saved_stdin
    return code, out.getvalue(), err.getvalue()


def check_cli_argv(argv: list[str]) -> int:
    """Run argv and assert the property; returns the exit code (AssertionError says what broke)."""
    try:
        code, _out, err = invoke(argv)
    except BaseException as exc:  # noqa: BLE001 - an escaped exception is exactly what the property forbids
        raise AssertionError(f"ollama-deck {argv!r} raised {type(exc).__name__}: {exc}") from exc
    assert code in EXIT_CODES, f"exit {code} for {argv!r}: {err[-400:]}"
    assert "Traceback" not in err, f"a traceback for {argv!r}: {err[-800:]}"
    if code == 2 and argv:
        lines = err.strip().splitlines()
        assert len(lines) == 1, f"exit 2 for {argv!r} with {len(lines)} lines: {err[-800:]}"
        assert lines[0].startswith(f"ollama-deck {argv[0]}: ") and len(lines[0]) > len(argv[0]) + 20, lines[0]
    return code


@contextlib.contextmanager
def isolated(folder: Path) -> Iterator[str]:
    """Run the commands where they touch nothing real: settings, history and relative output paths
    under `folder`, no `ollama` on PATH (so --managed cannot start a server); yields a URL whose port
    refuses connections, so runs that would measure fail at once with exit 1."""
    saved = {name: os.environ.get(name) for name in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME",
                                                      "XDG_CACHE_HOME", "PATH", "HOME")}
    cwd = os.getcwd()
    (folder / "bin").mkdir(parents=True, exist_ok=True)
    for name in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME", "HOME"):
        os.environ[name] = str(folder / name.lower())
    os.environ["PATH"] = str(folder / "bin")
    os.chdir(folder)
    try:
        yield f"http://127.0.0.1:{closed_port()}"
    finally:
        os.chdir(cwd)
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def playground(folder: Path) -> dict[str, str]:
    """Files the generated argv may name, made in `folder`: name -> path."""
    folder.mkdir(parents=True, exist_ok=True)
    binary = folder / "binary.png"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n" + os.urandom(256))
    prompts = folder / "prompts.txt"
    prompts.write_text("one prompt\nanother prompt\n", encoding="utf-8")
    # A copy: any path the fuzzer names may be written or set aside by the command (an output, a
    # history), and the suite's own data must never be.
    show = folder / "show.json"
    show.write_bytes(Path(QWEN_SHOW).read_bytes())
    return {"show": str(show), "binary": str(binary), "folder": str(folder), "missing": str(folder / "no" / "x"),
            "prompts": str(prompts), "stdout": "-", "relative": "out.json", "devnull": os.devnull}


ROOT = Path(__file__).resolve().parents[2]
QWEN_SHOW = str(ROOT / "tests/data/show_qwen3_14b.json")
# Plausible values per option, so that many runs get past the argument checks and the deeper code
# (reading files, estimating, connecting, planning a sweep) is fuzzed too.
GOOD: dict[str, list[str]] = {
    "--show": [QWEN_SHOW], "--model-size": ["9000210784", "4920753328"], "--ctx": ["8192", "4096", "40960"],
    "--model": ["qwen3:14b", "qwen3:0.6b"], "--managed": ["--managed"], "--parallel": ["1", "2", "1,2,4"], "--batch": ["512", "2048"],
    "--ubatch": ["256", "512"], "--num-gpu": ["0", "20", "41"], "--gpu-overhead-mib": ["0", "512.5"],
    "--gpu-total-mib": ["24564", "81920"], "--gpu-used-mib": ["0", "900"], "--runtime-overhead-mib": ["400"],
    "--ollama-version": ["0.12.6", "0.11.10", "0.30.2"], "TEXT": ["hi", "-", "Why is decode memory-bound?"],
    "--num-predict": ["8", "1"], "--system": ["be brief", ""], "--temperature": ["0.7", "0"], "--seed": ["42"],
    "--num-ctx": ["4096"], "--kv-cache": ["f16", "q8_0,q4_0"], "--context": ["8192", "4096,8192"],
    "--flash-attention": ["on", "on,off"], "--concurrency": ["1", "1,2,4"], "--requests": ["4", "32"],
    "--duration": ["1.5", "30"], "--rate": ["2", "0.5"], "--warmup": ["0", "1"], "--prompt-set": ["mixed", "math-apples"],
    "--ttft-p95-ms": ["2000"], "--tpot-p95-ms": ["100"], "--min-success": ["0.99", "0", "1"],
    "--json": ["out.json", "-"], "--csv": ["out.csv"], "--markdown": ["out.md"], "--history": ["h.sqlite3"],
    "--config-dir": ["cfg"], "--listen": ["127.0.0.1:0"], "--interval": ["1", "0.25"],
}
REQUIRED_FIRST = {"estimate": ("--show", "--model-size", "--ctx"), "prompt": ("--model", "--no-think", "TEXT"),
                  "bench": ("--model",), "exporter": ("--listen",)}
PATH_DESTS = {"show", "prompt_file", "json", "csv", "markdown", "history", "config_dir"}


def parser_for(command: str) -> argparse.ArgumentParser:
    """The command's real parser, built as app.cli.main builds it."""
    module = importlib.import_module(f"app.cli.{SUBCOMMANDS[command]}")
    parser = OneLineParser(prog=f"ollama-deck {command}")
    module.add_arguments(parser)
    return parser


# Real argv cannot hold NUL; undecodable bytes reach Python as surrogate escapes U+DC80-U+DCFF.
_chars = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00") | st.sampled_from(
    ["\udcff", "\udc80", "\n", "\t", "é", "中", "\u202e", "-", "=", ",", ":"])
TEXT = st.text(_chars, max_size=24)
NUMBERS = st.one_of(
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.integers(min_value=-5, max_value=70_000).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["nan", "inf", "-inf", "1e12", "1e308", "0", "-0", "0.5", "1", "2", "-1", "65535", "0x10",
                     "1_000", " 7 ", "", "١٢"]),
)
LISTS = st.lists(NUMBERS, min_size=0, max_size=4).map(",".join)


def _refused_url(text: str) -> bool:
    try:
        parse_server_url(text)
    except ServerUrlError:
        return True
    return False


def url_values(closed: str) -> st.SearchStrategy[str]:
    """The closed-port URL (paths and all), or text the URL parser refuses: never a host to look up."""
    return st.one_of(st.just(closed), st.just(closed + "/prefix/"), st.just(closed.replace("http://", "")),
                     st.sampled_from(["http://127.0.0.1:99999", "http://127.0.0.1:abc", "::::", "https://h/p",
                                      "http://", "u:p@h", "ftp://x", "http://[::1", "h?q=1", "0x7f.1"]),
                     TEXT.filter(_refused_url))


def value_for(action: argparse.Action, paths: dict[str, str], closed: str,
              tricky_share: float) -> st.SearchStrategy[str]:
    """Values for one option: with probability tricky_share its kind's tricky ones or junk, else a good one."""
    flag = action.option_strings[0] if action.option_strings else "TEXT"
    if flag == "--url":
        return url_values(closed) if tricky_share else st.sampled_from([closed, closed, closed + "/prefix/"])
    options: list[st.SearchStrategy[str]] = [TEXT]
    if action.choices:
        options.append(st.sampled_from([str(c) for c in action.choices]))
    if action.type in (int, float) or flag in ("--parallel", "--context", "--concurrency"):
        options += [NUMBERS, NUMBERS, LISTS]
    if action.dest in PATH_DESTS or flag == "TEXT":
        options.append(st.sampled_from(list(paths.values())))
    tricky = st.one_of(options)
    plausible = GOOD.get(flag) or [str(c) for c in action.choices or ()] or ["x"]
    if flag == "--prompt-file":
        plausible = [paths["prompts"]]
    if flag == "--show":
        plausible = [paths["show"]]
    good = st.sampled_from(plausible)
    return st.floats(0, 1).flatmap(lambda roll: tricky if roll < tricky_share else good)


@st.composite
def argv_for(draw: st.DrawFn, command: str, paths: dict[str, str], closed: str) -> list[str]:
    """One argv for `command`: a random subset of its options (the required ones usually in), shuffled."""
    parser = parser_for(command)
    tricky_share = draw(st.sampled_from([0.0, 0.15, 0.5, 1.0]))  # from all-plausible to all-junk argv
    groups: list[list[str]] = []
    has_url = False
    taken: set[int] = set()  # mutually exclusive groups already used (kept apart in plausible argv)
    exclusive = {id(a): id(g) for g in parser._mutually_exclusive_groups for a in g._group_actions}
    for action in parser._actions:
        flag = action.option_strings[0] if action.option_strings else "TEXT"
        roll = draw(st.integers(0, 99))  # shrinks towards 0: the simplest argv has every option but help
        # About four optional flags an argv whatever the command has: more of them together mostly refuse each
        # other (exit 2), and the generator must reach past the checks too.
        wanted = 90 if flag in REQUIRED_FIRST[command] or flag == "--url" else 30 if flag == "--managed" else \
            max(5, min(15, 400 // len(parser._actions)))
        if flag in ("-h", "--help"):
            roll, wanted = 99 - roll, 3  # help exits 0 at once: rare, so the other options get run
        if roll >= wanted:
            continue
        group = exclusive.get(id(action))
        if group is not None and group in taken and tricky_share < 0.5:
            continue
        if group is not None:
            taken.add(group)
        if action.nargs == 0:
            groups.append([draw(st.sampled_from(action.option_strings))])
            continue
        value = draw(value_for(action, paths, closed, tricky_share))
        if flag == "TEXT":
            groups.append([value])
        elif draw(st.booleans()):
            groups.append([f"{flag}={value}"])
        else:
            groups.append([flag, value])
        has_url = has_url or flag == "--url"
    if not has_url:  # never the default address: a server running on this machine must not be measured
        groups.append(["--url", closed])
    order = draw(st.permutations(groups))
    return [command, *(part for group in order for part in group)]


__all__ = ["EXIT_CODES", "argv_for", "check_cli_argv", "invoke", "isolated", "parser_for", "playground"]
