"""Send one prompt, stream the reply and report its figures (TTFT, tokens, tokens/s, load, total).

The answer streams to stdout and the thinking trace to stderr, each line marked "thinking> ";
the figures follow on stderr, so `> answer.txt` keeps only the answer. With --json, stdout holds
exactly one JSON object (figures, answer, thinking and events) and the live text goes to stderr.

What the server did without saying so while the reply ran (a prompt it cut to fit its context, layers
it put on the CPU, a model it unloaded) follows on stderr as events, each with its evidence and what to
do: the prompt is counted in the server's own tokens after the reply, and its loaded models are read
before and after the request.
Exit status: 0 done, 1 the server refused or failed, 2 bad arguments, 130 interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any, TextIO

from app.cli.backend_arg import add_backend_argument, chosen_backend
from app.cli.openai_access import add_access_arguments, prepare
from app.cli.checks import ArgProblem, Range, check_config_dir, check_ranges, check_text, one_line, server_url
from app.core.console.output_length import DEFAULT_NUM_PREDICT, NO_CAP, cap_note
from app.core.errors import DeckError, MalformedResponse, ModelNotFound, ServerUnreachable
from app.core.models import RunningModel
from app.core.replies import StreamChunk
from app.core.console.reply_stats import figure_rows
from app.core.watch.events import event_lines

DEFAULT_URL = "http://127.0.0.1:11434"
THINK_MARK = "thinking> "
RANGES = (
    Range("--num-predict", NO_CAP, 1 << 24, "tokens",
          "output tokens, thinking included, 0 for no cap; no context holds more"),
    Range("--temperature", 0, 2, "", "0 picks the likeliest token; above 2 the text turns to noise"),
    Range("--seed", -1, 2**31 - 1, "", "-1 picks a random seed; the server keeps a 32-bit seed"),
    Range("--num-ctx", 1, 1 << 24, "tokens", "context tokens; no model is trained on more than 2^24"),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Fill the `prompt` parser."""
    parser.add_argument("text", metavar="TEXT", help='the prompt ("-" reads it from stdin)')
    parser.add_argument("--model", required=True,
                        help="local model, e.g. qwen3:14b (llama-server: the name it lists, GET /v1/models)")
    parser.add_argument("--url", help=f"the server (default: the saved settings' address, else {DEFAULT_URL})")
    add_backend_argument(parser)
    add_access_arguments(parser)
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--think", dest="think", action="store_const", const=True, help="thinking mode (think: true)")
    mode.add_argument("--no-think", dest="think", action="store_const", const=False,
                      help="non-thinking mode (think: false)")
    mode.add_argument("--think-level", dest="think", choices=("low", "medium", "high"),
                      help="thinking effort, for models that take levels (e.g. gpt-oss)")
    parser.add_argument("--num-predict", type=int, metavar="N", default=DEFAULT_NUM_PREDICT,
                        help=f"at most N tokens, thinking included (default {DEFAULT_NUM_PREDICT}; 0: no cap, the "
                             "model's default, which lets a model that never stops run until its context is full)")
    parser.add_argument("--system", default="", help="system prompt")
    parser.add_argument("--temperature", type=float)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--num-ctx", type=int, metavar="N", help="context tokens (a new value reloads the model)")
    parser.add_argument("--json", action="store_true", help="print one JSON object with the figures at the end")
    parser.add_argument("--config-dir", help="settings folder to read the default URL from")


class _StdioSink:
    """Writes the stream as it comes: answer to `answer_out`, marked thinking to `thinking_out`."""

    def __init__(self, answer_out: TextIO, thinking_out: TextIO) -> None:
        self.answer_out = answer_out
        self.thinking_out = thinking_out
        self._thinking_at_line_start = True
        self._in_thinking = False
        self._dim = thinking_out.isatty()

    def on_chunk(self, index: int, chunk: StreamChunk) -> None:
        if chunk.thinking:
            self._in_thinking = True
            self._write_thinking(chunk.thinking)
        if chunk.content:
            self._end_thinking()
            self.answer_out.write(chunk.content)
            self.answer_out.flush()

    def _write_thinking(self, text: str) -> None:
        out = []
        for piece in text.splitlines(keepends=True):
            if self._thinking_at_line_start:
                out.append(THINK_MARK)
            out.append(piece)
            self._thinking_at_line_start = piece.endswith("\n")
        body = "".join(out)
        self.thinking_out.write(f"\x1b[2m{body}\x1b[0m" if self._dim else body)
        self.thinking_out.flush()

    def _end_thinking(self) -> None:
        if self._in_thinking:
            self._in_thinking = False
            if not self._thinking_at_line_start:
                self.thinking_out.write("\n")
                self._thinking_at_line_start = True
            self.thinking_out.flush()

    def on_done(self, outcome: Any) -> None:
        self._end_thinking()
        if outcome.content and not outcome.content.endswith("\n"):
            self.answer_out.write("\n")
        self.answer_out.flush()


def _default_url(config_dir: str | None, backend: Any) -> str:
    from app.adapters.storage.settings_store import SettingsStore

    try:
        # Only read: a damaged file stays where it is for the window to move aside and report; said here too.
        loaded = SettingsStore(Path(config_dir) if config_dir else None, backend.tuning).load(change_nothing=True)
    except Exception as exc:  # noqa: BLE001 - an unreadable settings file must not stop a prompt
        print(f"ollama-deck prompt: settings: cannot be read ({type(exc).__name__}); using {DEFAULT_URL}",
              file=sys.stderr)
        return DEFAULT_URL
    for problem in loaded.problems if loaded.unusable else ():
        print(f"ollama-deck prompt: settings: {one_line(problem)}", file=sys.stderr)
    return loaded.settings.base_url


def _prompt_text(text: str) -> str:
    if text != "-":
        return text
    try:
        text = sys.stdin.read()
        text.encode("utf-8")  # a C locale hands undecodable bytes over as surrogate escapes instead
    except (UnicodeDecodeError, UnicodeEncodeError) as exc:
        raise ArgProblem(f"the prompt on stdin is not UTF-8 text ({exc.reason} at offset {exc.start}); "
                         "pipe in text") from None
    return text


class CannotThink(DeckError):
    """Thinking was asked for a model that cannot think."""

    hint = "use --no-think"


async def _send(backend: Any, url: str, request: Any, sink: _StdioSink) -> Any:
    from app.cli.server_reply import require_reply
    from app.services.prompts import ReplyWatch, loaded_context, stream_reply
    from app.services.watchdog import Watchdog

    counter = backend.prompt_counter(url) if backend.prompt_counter is not None else None
    watch = ReplyWatch(Watchdog(subject=url), counter)
    started = watch.now()
    try:
        async with backend.console(url) as client:
            await require_reply(client, url)  # a hung server is named in seconds; the chat may wait for a load
            if request.think not in (False, None):
                # Asked before sending: a server whose model cannot think may otherwise answer without a word.
                why = (await client.show(request.model)).why_no_thinking()
                if why:
                    raise CannotThink(f"{request.model} cannot think: {why}")
            before = await _loaded(backend, url)
            if before is not None:
                watch.watchdog.feed_loaded(before)
            outcome = await stream_reply(client, request, sink=sink)
            after = await _loaded(backend, url)
            if after is not None:
                watch.watchdog.feed_loaded(after)
            return await watch.finish(outcome, request, started, context_per_slot=loaded_context(after, request.model))
    finally:
        if counter is not None:
            await counter.aclose()


async def _loaded(backend: Any, url: str) -> list[RunningModel] | None:
    """The server's loaded models now, where it lists them (None: it does not, or could not say)."""
    if not backend.capabilities.lists_loaded:
        return None
    try:
        async with backend.catalog(url) as catalog:
            return list(await catalog.ps())
    except DeckError:
        return None


def _error_text(error: DeckError, backend: Any, model: str) -> str:
    """The error in a shell user's words: how to start this backend's server, get a model, or name another kind."""
    from app.backends import registry

    words = backend.command_words
    if isinstance(error, ServerUnreachable):
        return f"{error.message} — {words.start_hint}"
    if isinstance(error, ModelNotFound):
        return f"{error.message} — {words.model_hint.format(model=model)}"
    if isinstance(error, MalformedResponse):
        others = ", ".join(name for name in registry.names() if name != backend.name)
        return (f"{error.message} — this is not {backend.display_name}'s API at that address; if the server there "
                f"is another kind, name it with --backend ({others}), or check --url.")
    return error.user_text()


def _report(outcome: Any, request: Any, url: str) -> dict[str, Any]:
    data: dict[str, Any] = {"model": request.model, "url": url, "think": request.think}
    data.update(outcome.stats.to_json())
    data.update({"answer": outcome.content, "thinking": outcome.thinking})
    data.update({"events": [e.to_json() for e in outcome.events], "spoiled": bool(outcome.spoiled_by)})
    return data


def _print_events(outcome: Any) -> None:
    """The events seen during the reply, on stderr with the other notes (nothing when there were none)."""
    from app.services.prompts import spoiled_note

    if not outcome.events:
        return
    note = spoiled_note(outcome.events)
    lines = [f"events during this reply ({len(outcome.events)}):", *event_lines(outcome.events)]
    print("\n" + "\n".join(lines), file=sys.stderr)
    if note:
        print(f"ollama-deck prompt: {note}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    """Execute `ollama-deck prompt`; see the module text for the exit status."""
    from app.backends import registry
    from app.services.prompts import PromptOptions, PromptRequest

    backend = registry.get(chosen_backend(args))
    try:
        check_ranges(args, RANGES)
        check_text("--model", args.model, empty_ok=False)
        check_config_dir("--config-dir", args.config_dir)
        access_url, notes = prepare(args, backend.name, args.url)
        url = access_url or (server_url("--url", args.url).base_url if args.url is not None
                             else _default_url(args.config_dir, backend))
        text = _prompt_text(args.text)
    except ArgProblem as exc:
        print(f"ollama-deck prompt: {one_line(str(exc))}", file=sys.stderr)
        return 2
    if not text.strip():
        print("ollama-deck prompt: the prompt is empty; give the text to send, or - to read it from stdin",
              file=sys.stderr)
        return 2
    for note in notes:  # once every check passed: a refusal stays one line
        print(f"ollama-deck prompt: {note}", file=sys.stderr)
    request = PromptRequest(model=args.model, prompt=text, think=args.think, system=args.system,
                            options=PromptOptions(num_predict=args.num_predict or None, temperature=args.temperature,
                                                  seed=args.seed, num_ctx=args.num_ctx))
    sink = _StdioSink(sys.stderr if args.json else sys.stdout, sys.stderr)
    try:
        outcome = asyncio.run(_send(backend, url, request, sink))
    except KeyboardInterrupt:
        print("\nollama-deck prompt: stopped", file=sys.stderr)
        return 130
    except DeckError as exc:  # before the reply started: the server is not there or does not answer
        print(f"ollama-deck prompt: {one_line(_error_text(exc, backend, args.model))}", file=sys.stderr)
        return 1
    if outcome.error is not None:
        print(f"ollama-deck prompt: {one_line(_error_text(outcome.error, backend, args.model))}", file=sys.stderr)
        _print_events(outcome)
        return 1
    note = cap_note(request.options.num_predict, outcome.stats.done_reason, "raise --num-predict (0: no cap)")
    if note:
        print(f"ollama-deck prompt: {note}", file=sys.stderr)
    if args.json:
        print(json.dumps(_report(outcome, request, url), ensure_ascii=False))
    else:
        width = max(len(label) for label, _ in figure_rows(outcome.stats))
        lines = [f"{label:<{width}}  {value}" for label, value in figure_rows(outcome.stats)]
        print("\n" + "\n".join(lines), file=sys.stderr)
    _print_events(outcome)
    return 0
