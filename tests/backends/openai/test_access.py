"""Where an OpenAI-compatible server is and the key it wants: base URLs read once, keys found in order and kept
in the secret store (a real keyring backend, in memory), never in settings or logs; the spec's words."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

import keyring
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from keyring.backends import fail

from app.adapters import secrets
from app.adapters.http.openai_sse import Fields
from app.adapters.secrets import KeyStoreStatus
from app.backends import registry
from app.backends.openai import endpoint, wire
from app.backends.openai.endpoint import SESSION, KeySource
from app.backends.openai.errors import malformed
from app.cli import main
from app.cli.checks import ArgProblem
from app.cli.openai_access import prepare
from app.core.errors import DeckError
from app.core.server.url import ServerUrlError
from tests.backends.openai import vllm_transcripts as vllm
from tests.backends.openai.replay_server import json_reply, replay_server, sse

KEY = "sk-secret-4b1d"


@pytest.mark.parametrize(("given_url", "base"), [
    ("https://api.example.com/v1", "https://api.example.com:443"),
    ("https://api.example.com/v1/", "https://api.example.com:443"),
    ("http://gpu-box:8000", "http://gpu-box:8000"),
    ("gpu-box", "http://gpu-box:8000"),
    ("http://127.0.0.1:8080/v1", "http://127.0.0.1:8080"),
    ("https://proxy.lan/llm/v1", "https://proxy.lan:443/llm"),
    ("http://[::1]:30000/v1", "http://[::1]:30000"),
])
def test_a_base_url_is_normalised_once_either_way_it_is_written(given_url, base):
    assert endpoint.parse_base_url(given_url).base_url == base
    assert endpoint.normalise(given_url) == base


@pytest.mark.parametrize("bad", ["ftp://h", "https://user:pw@h/v1", "http://h:99999", "http://h/v1?x=1"])
def test_a_url_that_cannot_be_a_base_is_refused_with_the_reason(bad):
    with pytest.raises(ServerUrlError):
        endpoint.parse_base_url(bad)


def test_keys_are_found_session_first_then_the_environment_then_the_store(memory_keyring):
    url = "http://127.0.0.1:8000"
    assert SESSION.find(url) == endpoint.FoundKey(None, KeySource.NONE, KeyStoreStatus.NOT_FOUND)
    SESSION.forget()
    assert secrets.set_key(url, "from-store").status is KeyStoreStatus.STORED
    assert memory_keyring.passwords == {("ollama-deck", url): "from-store"}
    assert SESSION.find(url + "/v1").source is KeySource.SECRET_STORE  # the same server, written the other way
    assert SESSION.find(url, environ={secrets.KEY_ENV: "from-env"}).key == "from-env"
    SESSION.remember(url, "from-flag")
    assert SESSION.find(url, environ={secrets.KEY_ENV: "from-env"}) == endpoint.FoundKey("from-flag", KeySource.SESSION)
    assert SESSION.headers(url) == (("Authorization", "Bearer from-flag"),)
    assert secrets.delete_key(url).status is KeyStoreStatus.STORED
    assert secrets.delete_key(url).status is KeyStoreStatus.NOT_FOUND


def test_without_a_secret_store_every_call_says_so_with_how_to_fix_it():
    keyring.set_keyring(fail.Keyring())
    lookup = secrets.get_key("http://h:8000")
    assert lookup.status is KeyStoreStatus.NO_BACKEND and lookup.key is None
    saved = secrets.set_key("http://h:8000", KEY)
    assert saved.status is KeyStoreStatus.NO_BACKEND
    assert "this session only" in saved.detail and "gnome-keyring" in saved.detail and "OLLAMA_DECK_API_KEY" in saved.detail


def test_a_store_that_breaks_is_failed_not_raised(memory_keyring, caplog):
    def broken(*_args):
        raise keyring.errors.KeyringLocked("the collection is locked")
    memory_keyring.get_password = broken
    with caplog.at_level(logging.DEBUG):
        lookup = secrets.get_key("http://h:8000")
    assert lookup.status is KeyStoreStatus.FAILED and "locked" in lookup.detail


def test_plain_http_to_another_host_with_a_key_is_warned_about(monkeypatch):
    monkeypatch.setenv("DECK_TEST_KEY", KEY)
    args = argparse.Namespace(api_key_env="DECK_TEST_KEY", save_api_key=False, ca_bundle=None)
    _url, notes = prepare(args, "openai", "http://10.1.2.3:8000/v1")
    assert any("warning" in n and "plain http://" in n and "10.1.2.3" in n for n in notes)
    for local in ("http://127.0.0.1:8000", "https://10.1.2.3/v1"):
        SESSION.forget()
        assert not [n for n in prepare(args, "openai", local)[1] if "warning" in n]
    assert all(KEY not in n for n in notes)


def test_access_flags_are_refused_for_other_backends_and_without_what_they_need(monkeypatch):
    args = argparse.Namespace(api_key_env="X", save_api_key=False, ca_bundle=None)
    with pytest.raises(ArgProblem, match="--api-key-env only applies to --backend openai"):
        prepare(args, "llama_server", "http://127.0.0.1:8080")
    monkeypatch.delenv("X", raising=False)
    with pytest.raises(ArgProblem, match="X: that environment variable is not set"):
        prepare(args, "openai", "http://127.0.0.1:8000")
    with pytest.raises(ArgProblem, match="--save-api-key keeps the key given with --api-key-env"):
        prepare(argparse.Namespace(api_key_env=None, save_api_key=True, ca_bundle=None), "openai", "http://h:1")
    with pytest.raises(ArgProblem, match="--ca-bundle /nonexistent.pem: no such readable file"):
        prepare(argparse.Namespace(api_key_env=None, save_api_key=False, ca_bundle="/nonexistent.pem"), "openai",
                "https://h/v1")


def test_a_ca_bundle_that_is_not_pem_and_a_key_a_header_cannot_carry_are_refused(tmp_path, monkeypatch):
    junk = tmp_path / "ca.pem"
    junk.write_text("not a certificate")
    with pytest.raises(ArgProblem, match="not a PEM file of CA certificates"):
        prepare(argparse.Namespace(api_key_env=None, save_api_key=False, ca_bundle=str(junk)), "openai", "https://h/v1")
    monkeypatch.setenv("DECK_TEST_KEY", "two words")
    with pytest.raises(ArgProblem, match="characters an HTTP header cannot carry"):
        prepare(argparse.Namespace(api_key_env="DECK_TEST_KEY", save_api_key=False, ca_bundle=None), "openai",
                "http://127.0.0.1:8000")


def test_a_refusal_after_the_access_notes_is_still_one_line(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("DECK_TEST_KEY", KEY)
    code = main(["bench", "--backend", "openai", "--url", "http://10.1.2.3:8000", "--api-key-env", "DECK_TEST_KEY",
                 "--model", "m", "--requests", "0", "--no-history", "--config-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err


def test_prompt_with_a_saved_key_reaches_the_server_and_the_key_is_nowhere_else(tmp_path, monkeypatch, capsys, caplog,
                                                                                 memory_keyring):
    monkeypatch.setenv("DECK_TEST_KEY", KEY)
    config = tmp_path / "cfg"

    def route(method, path):
        if path == "/v1/models":
            return json_reply(200, vllm.MODELS)
        return sse(vllm.REASONING) if path == "/v1/chat/completions" else json_reply(404, {"detail": "Not Found"})

    with replay_server(route) as server, caplog.at_level(logging.DEBUG):
        code = main(["prompt", "--backend", "openai", "--url", server.base_url + "/v1", "--model", vllm.MODEL,
                     "--api-key-env", "DECK_TEST_KEY", "--save-api-key", "--no-think", "--json", "--config-dir", str(config),
                     "count"])
        out = capsys.readouterr()
        assert code == 0, out.err
        # the next run finds it in the store, with no flag
        SESSION.forget()
        monkeypatch.delenv("DECK_TEST_KEY")
        assert main(["prompt", "--backend", "openai", "--url", server.base_url, "--model", vllm.MODEL, "--no-think", "--json",
                     "--config-dir", str(config), "count"]) == 0
        out2 = capsys.readouterr()
    assert all(s.headers.get("authorization") == f"Bearer {KEY}" for s in server.seen)
    assert memory_keyring.passwords == {("ollama-deck", server.base_url): KEY}
    report = json.loads(out.out)
    assert report["eval_count"] == 5 and report["eval_tokens_per_s"] is None  # usage's count; no server time
    assert report["ttft_ms"] is not None and report["answer"] == "one, two, three"
    assert "kept in the desktop's secret store" in out.err
    for text in (out.out, out.err, out2.out, out2.err, caplog.text):
        assert KEY not in text
    for path in [*config.rglob("*")] if config.exists() else []:
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path


def test_the_spec_speaks_for_an_attached_server():
    spec = registry.get("openai")
    assert spec.display_name == "OpenAI-compatible"
    assert spec.capabilities.names() == ["server_metrics", "thinking_control"]
    for missing in ("pull", "create", "delete", "lists_loaded", "load_unload", "restarts_with_settings",
                    "reports_slots"):
        assert spec.why_not(missing)
    assert "started and configured on its own machine" in spec.why_not("restarts_with_settings")
    assert "cannot restart it with settings" in spec.why_not("restarts_with_settings")
    assert "vllm serve" in spec.why_not("pull")
    assert "enable_thinking" in spec.reply_words.think_hint
    assert spec.tuning.kind == "openai" and "host" not in spec.tuning.unsupported()


# No deadline: a busy 2-core machine must not fail a parser test on time.
PROPERTY = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(st.lists(st.binary(max_size=200), max_size=8))
def test_hostile_lines_give_chunks_or_typed_errors_only(lines):
    parser = wire.parser("http://h:1")
    for line in [*lines, b"data: [DONE]"]:
        try:
            parser.feed(line, 1.0)
        except DeckError:
            return
    assert parser.done


@PROPERTY
@given(st.dictionaries(st.sampled_from(["prompt_tokens", "completion_tokens", "prompt_tokens_details"]),
                       st.one_of(st.integers(-5, 10**6), st.floats(), st.text(max_size=3), st.none(),
                                 st.dictionaries(st.just("cached_tokens"), st.integers(-5, 10**6)))))
def test_any_usage_record_gives_counts_or_a_malformed_error(usage):
    try:
        final = wire.final_figures("stop", usage)
    except DeckError:
        return
    for value in (final.prompt_tokens, final.output_tokens, final.cached_prompt_tokens):
        assert value is None or value >= 0
    assert Fields(malformed).usage_counts(usage)  # the same record reads the same way again


def test_bench_refuses_server_settings_for_an_attached_server(capsys, tmp_path):
    code = main(["bench", "--backend", "openai", "--url", "http://127.0.0.1:9/v1", "--model", "m", "--parallel", "1,2",
                 "--no-history", "--config-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2
    assert "started and configured on its own machine" in err and "--concurrency" in err


def test_help_says_how_urls_are_read():
    import subprocess

    done = subprocess.run([sys.executable, "-m", "app", "prompt", "--help"], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[3], timeout=60)
    assert "https://HOST[/v1]" in done.stdout and "/v1 dropped" in done.stdout and "--api-key-env" in done.stdout
