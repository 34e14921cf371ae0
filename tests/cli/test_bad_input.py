"""Bad input on `estimate`, `prompt` and `bench`: each case one stderr line naming the problem, exit 2,
before anything is measured; and a server that accepts connections but never answers, named in seconds."""

from __future__ import annotations

import argparse
import http.server
import io
import json
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.cli import bench as bench_cli
from app.cli import main
from app.cli import server_reply
from tests.cli.cli_property import invoke
from tests.fakes.raw_http import closed_port

ROOT = Path(__file__).resolve().parents[2]
QWEN_SHOW = ROOT / "tests/data/show_qwen3_14b.json"
LLAMA_TENSORS = ROOT / "tests/data/show_llama3_1_8b_tensors.json"
ESTIMATE = ["estimate", "--show", str(QWEN_SHOW), "--model-size", "9000210784", "--ctx", "8192"]


def one_line_exit_2(argv: list[str], *needles: str) -> str:
    """Run argv; assert exit 2 with exactly one stderr line holding every needle; return that line."""
    code, out, err = invoke(argv)
    lines = err.strip().splitlines()
    assert code == 2, (code, err)
    assert len(lines) == 1 and lines[0].startswith(f"ollama-deck {argv[0]}: "), err
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert "Traceback" not in err and out == ""
    return lines[0]


@pytest.fixture
def closed_url() -> str:
    return f"http://127.0.0.1:{closed_port()}"


# ---- estimate ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(("flag", "value", "needle"), [
    ("--gpu-total-mib", "nan", "--gpu-total-mib must be a finite number, got nan"),
    ("--gpu-total-mib", "inf", "--gpu-total-mib must be a finite number, got inf"),
    ("--gpu-overhead-mib", "nan", "--gpu-overhead-mib must be a finite number, got nan"),
    ("--gpu-total-mib", "0", "--gpu-total-mib must be above 0"),
    ("--gpu-total-mib", "1e300", "--gpu-total-mib must be at most 1048576"),
    ("--ctx", "100000000", "--ctx must be at most 16777216"),
    ("--parallel", "100000", "--parallel must be at most 256"),
    ("--batch", "0", "--batch must be at least 1"),
    ("--num-gpu", "-1", "--num-gpu must not be negative"),
    ("--runtime-overhead-mib", "inf", "--runtime-overhead-mib must be a finite number"),
    ("--model-size", str(10**20), "--model-size must be at most"),
])
def test_estimate_numbers_out_of_range(flag: str, value: str, needle: str) -> None:
    line = one_line_exit_2([*ESTIMATE, flag, value], needle, "allowed:")
    assert line.count("(allowed: ") == 1  # the range and its reason come with the refusal


def _saved_show(tmp_path: Path, source: Path, change) -> str:
    show = json.loads(source.read_text())
    change(show)
    path = tmp_path / "show.json"
    path.write_text(json.dumps(show))
    return str(path)


def test_estimate_refuses_a_show_reply_with_a_huge_block_count(tmp_path: Path) -> None:
    path = _saved_show(tmp_path, QWEN_SHOW, lambda s: s["model_info"].update({"qwen3.block_count": 10**12}))
    one_line_exit_2(["estimate", "--show", path, "--model-size", "9000210784", "--ctx", "8192"],
                    "'qwen3.block_count' is 1000000000000, above the 4096 any model has")


def test_estimate_refuses_a_non_numeric_tensor_shape(tmp_path: Path) -> None:
    def damage(show: dict) -> None:
        show["tensors"][0]["shape"] = ["abc", 4096]

    path = _saved_show(tmp_path, LLAMA_TENSORS, damage)
    one_line_exit_2(["estimate", "--show", path, "--model-size", "4920753328", "--ctx", "8192"],
                    "tensor shape ['abc', 4096] holds 'abc', not a dimension")


def test_estimate_refuses_json_nested_too_deep_and_binary_files(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    one_line_exit_2(["estimate", "--show", str(deep), "--model-size", "1", "--ctx", "1"], "cannot read", "as JSON")
    png = tmp_path / "image.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    one_line_exit_2(["estimate", "--show", str(png), "--model-size", "1", "--ctx", "1"], "is not UTF-8 text")


@pytest.mark.parametrize(("url", "needle"), [
    ("http://127.0.0.1:99999", "the port '99999' is not a number from 1 to 65535"),
    ("::::", "an IPv6 address goes in brackets"),
    ("https://127.0.0.1:11434", "https is not supported"),
    ("http://user:secret@127.0.0.1:11434", "user names and passwords"),
])
def test_estimate_url_problems(url: str, needle: str) -> None:
    one_line_exit_2(["estimate", "--model", "qwen3:14b", "--url", url, "--ctx", "8192"], f"--url: {url!r}"[:20],
                    needle)


# ---- prompt ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("args", "needle"), [
    (["--url", "::::"], "an IPv6 address goes in brackets"),
    (["--url", "http://127.0.0.1:99999"], "the port '99999' is not a number from 1 to 65535"),
    (["--num-ctx", "-5"], "--num-ctx must be at least 1, got -5"),
    (["--num-predict", "-1"], "--num-predict must not be negative, got -1 (allowed: 0 to 16777216 tokens"),
    (["--temperature", "nan"], "--temperature must be a finite number"),
    (["--temperature", "9"], "--temperature must be at most 2"),
    (["--seed", str(2**40)], "--seed must be at most 2147483647"),
    (["--model", " "], "--model is empty"),
])
def test_prompt_bad_input(args: list[str], needle: str, closed_url: str) -> None:
    one_line_exit_2(["prompt", "--model", "qwen3:14b", "--no-think", "--url", closed_url, *args, "hi"], needle)


def test_undecodable_argv_bytes_are_named() -> None:
    # A shell passes bytes that are not UTF-8 as they are; Python hands them over as surrogate escapes.
    one_line_exit_2(["prompt", "--model", "qwen3:14b", "--no-think", "caf\udce9"],
                    "b'caf\\xe9' is not valid UTF-8 text")


# ---- bench -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("args", "needle"), [
    (["--url", "http://127.0.0.1:abc"], "the port 'abc' is not a number from 1 to 65535"),
    (["--url", "http://127.0.0.1:99999"], "the port '99999' is not a number from 1 to 65535"),
    (["--url", "::::"], "an IPv6 address goes in brackets"),
    (["--url", "https://127.0.0.1:11434/ollama"], "https is not supported"),
    (["--duration", "inf"], "--duration must be a finite number, got inf"),
    (["--duration", "nan"], "--duration must be a finite number, got nan"),
    (["--duration", "0"], "--duration must be above 0"),
    (["--duration", "100000"], "--duration must be at most 86400"),
    (["--requests", str(10**12)], "--requests must be at most 1000000"),
    (["--min-success", "2"], "--min-success must be at most 1, got 2"),
    (["--ttft-p95-ms", "nan"], "--ttft-p95-ms must be a finite number"),
    (["--tpot-p95-ms", "-1"], "--tpot-p95-ms must be above 0"),
    (["--rate", "inf"], "--rate must be a finite number"),
    (["--warmup", "-1"], "--warmup must not be negative"),
    (["--num-predict", str(2**30)], "--num-predict must be at most 16777216"),
    (["--concurrency", "1,5000"], "--concurrency must be at most 1024, got 5000"),
    (["--requests", "1e12"], "argument --requests: invalid int value: '1e12'"),
])
def test_bench_bad_input(args: list[str], needle: str, closed_url: str, tmp_path: Path) -> None:
    one_line_exit_2(["bench", "--model", "m", "--url", closed_url, "--config-dir", str(tmp_path), "--no-history",
                     *args], needle)


def test_bench_refuses_a_binary_prompt_file(tmp_path: Path, closed_url: str) -> None:
    png = tmp_path / "prompts.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)))
    one_line_exit_2(["bench", "--model", "m", "--url", closed_url, "--config-dir", str(tmp_path), "--no-history",
                     "--prompt-file", str(png)], f"--prompt-file {png} is not UTF-8 text (byte 0x89 at offset 0)")


@pytest.mark.parametrize(("outputs", "needle"), [
    (["--json", "/nonexistent/x.json"], "--json /nonexistent/x.json: the folder /nonexistent does not exist"),
    (["--csv", "{tmp}"], "--csv {tmp} is a folder"),
    (["--markdown", "{tmp}/missing/r.md"], "the folder {tmp}/missing does not exist"),
    (["--json", "-", "--csv", "-"], "--json and --csv both write to stdout"),
    (["--json", "{tmp}/a", "--markdown", "{tmp}/a"], "name the same file"),
])
def test_bench_checks_its_outputs_before_the_run(outputs: list[str], needle: str, fake_ollama,
                                                  tmp_path: Path) -> None:
    argv = [part.replace("{tmp}", str(tmp_path)) for part in outputs]
    one_line_exit_2(["bench", "--model", "qwen3:0.6b", "--url", fake_ollama.url, "--requests", "2",
                     "--config-dir", str(tmp_path / "cfg"), "--no-history", *argv], needle.replace("{tmp}",
                                                                                                   str(tmp_path)))
    assert fake_ollama.requests == []  # refused before a single request went out


def test_bench_keeps_the_urls_scheme_port_and_path(tmp_path: Path) -> None:
    def settings_for(url: str, managed: bool = False) -> tuple:
        args = argparse.Namespace(config_dir=str(tmp_path), url=url, managed=managed)
        return bench_cli._settings(args)

    settings, url = settings_for("http://gpu-box:8080/ollama/")
    assert (settings.host, settings.port, url) == ("gpu-box", 8080, "http://gpu-box:8080/ollama")
    settings, url = settings_for("[::1]")  # no port: the server's default, not HTTP's 80
    assert (settings.host, settings.port, url) == ("::1", 11434, "http://[::1]:11434")
    with pytest.raises(bench_cli.InputError, match="--managed starts the server at host:port, so --url takes no"):
        settings_for("http://127.0.0.1:11434/ollama", managed=True)


# ---- a server that accepts the connection and never answers -----------------------------------------
@pytest.fixture
def silent_url() -> Iterator[str]:
    """A port whose kernel completes every connection (listen backlog) but no one ever reads or replies."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


@pytest.mark.parametrize("command", [
    ["prompt", "--model", "qwen3:14b", "--no-think", "hi"],
    ["estimate", "--model", "qwen3:14b", "--ctx", "8192"],
    ["bench", "--model", "qwen3:14b", "--no-history", "--quiet"],
])
def test_a_server_that_never_answers_is_named_within_the_short_timeout(command: list[str], silent_url: str,
                                                                       monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setattr(server_reply, "NO_REPLY_TIMEOUT_S", 0.3)
    extra = ["--config-dir", str(tmp_path)] if command[0] == "bench" else []
    started = time.monotonic()
    code, _out, err = invoke([*command, "--url", silent_url, *extra])
    took = time.monotonic() - started
    assert code == (2 if command[0] == "estimate" else 1), err  # estimate: 2 for any unusable source
    assert (f"The server at {silent_url} accepted the connection but sent no reply within 0.3 s; is it hung or "
            "still starting?") in err
    assert len(err.strip().splitlines()) == 1
    assert 0.3 <= took < 10.0  # the short timeout, not the 300 s a reply may take


def test_a_server_busy_loading_a_model_is_not_taken_for_a_hung_one(make_fake_ollama, monkeypatch) -> None:
    # The stand-in, like Ollama, sends the chat reply's head only once the model is loaded: a second,
    # much longer than the no-reply timeout; the version request is still answered at once.
    monkeypatch.setattr(server_reply, "NO_REPLY_TIMEOUT_S", 0.3)
    fake = make_fake_ollama(load_s=1.0, tokens_per_s=1000.0, answer_tokens=3)
    code, out, err = invoke(["prompt", "--model", "qwen3:14b", "--url", fake.url, "--no-think", "--json", "hi"])
    assert code == 0, err
    assert json.loads(out)["load_ms"] >= 900


# ---- the GUI's --url ---------------------------------------------------------------------------------
@pytest.mark.parametrize(("url", "needle"), [
    ("http://127.0.0.1:11434/ollama", "a path (/ollama) cannot be used here, only host and port"),
    ("http://127.0.0.1:99999", "the port '99999' is not a number from 1 to 65535"),
    ("https://127.0.0.1", "https is not supported"),
])
def test_the_guis_url_is_read_by_the_same_parser_before_any_window(url: str, needle: str) -> None:
    code, _out, err = invoke(["--url", url])
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert err.startswith("ollama-deck: argument --url: ") and needle in err


@pytest.mark.parametrize("stdin", [
    io.TextIOWrapper(io.BytesIO(b"\x89PNG\r\n\x1a\n\xff"), encoding="utf-8"),
    io.TextIOWrapper(io.BytesIO(b"caf\xe9"), encoding="ascii", errors="surrogateescape"),  # a C locale
])
def test_a_binary_prompt_on_stdin_is_refused(stdin, monkeypatch, capsys, closed_url: str) -> None:
    monkeypatch.setattr(sys, "stdin", stdin)
    assert main(["prompt", "--model", "qwen3:14b", "--no-think", "--url", closed_url, "-"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ollama-deck prompt: the prompt on stdin is not UTF-8 text") and err.count("\n") == 1


# ---- a base URL's path reaches the server -----------------------------------------------------------
class _RecordingHandler(http.server.BaseHTTPRequestHandler):
    """Answers like Ollama under any path prefix and records every request's target."""

    protocol_version = "HTTP/1.1"
    targets: list[str] = []

    def _reply(self, body: bytes, kind: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self.targets.append(self.path)
        self._reply(b'{"version":"0.12.6"}', "application/json")

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers["Content-Length"]))
        self.targets.append(self.path)
        final = {"model": "m", "created_at": "2026-01-01T00:00:00Z", "done": True, "done_reason": "stop",
                 "message": {"role": "assistant", "content": "ok"}, "total_duration": 1000, "eval_count": 1,
                 "eval_duration": 500, "prompt_eval_count": 1, "prompt_eval_duration": 100, "load_duration": 10}
        self._reply(json.dumps(final).encode() + b"\n", "application/x-ndjson")

    def log_message(self, *args: object) -> None:
        return None


def test_prompt_sends_every_request_under_the_urls_path() -> None:
    _RecordingHandler.targets = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _RecordingHandler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/ollama/"
        code, out, err = invoke(["prompt", "--model", "m", "--no-think", "--url", url, "hi"])
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
    assert code == 0 and out == "ok\n", err
    # the version, the chat, and what the reply's check asks after it (the loaded models, the prompt's count)
    assert _RecordingHandler.targets[:1] == ["/ollama/api/version"] and "/ollama/api/chat" in _RecordingHandler.targets
    assert all(target.startswith("/ollama/api/") for target in _RecordingHandler.targets)


def test_bench_without_a_model_or_demo_says_what_to_give(tmp_path: Path, closed_url: str) -> None:
    one_line_exit_2(["bench", "--url", closed_url, "--config-dir", str(tmp_path), "--no-history"],
                    "--model is needed", "--demo")
    one_line_exit_2(["bench", "--demo", "--backend", "ollama", "--config-dir", str(tmp_path), "--no-history"],
                    "--demo runs the embedded llama-server; it cannot measure --backend ollama")
