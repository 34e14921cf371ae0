"""The fleet file: what it reads into, and every refusal typed with its field, line and what to write instead."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.fleet import (
    FleetError,
    FleetNoteKind,
    FleetProblem,
    example_fleet,
    parse_fleet,
)

BACKENDS = ("ollama", "llama_server", "openai")


def test_the_example_reads_into_servers_a_balancer_and_prometheus() -> None:
    fleet = parse_fleet(example_fleet("llama_server"), BACKENDS)
    assert [(s.name, s.base_url, s.backend, s.host_label) for s in fleet.servers] == [
        ("box-a", "http://127.0.0.1:8081", "llama_server", "box-a"),
        ("box-b", "http://127.0.0.1:8082", "llama_server", "box-b")]
    assert fleet.balancer is not None
    assert (fleet.balancer.name, fleet.balancer.base_url, fleet.balancer.servers) == (
        "nginx", "http://127.0.0.1:8080", ("box-a", "box-b"))
    assert fleet.prometheus is not None and fleet.prometheus.base_url == "http://127.0.0.1:9090"
    assert fleet.notes == ()
    assert all(s.loopback for s in fleet.servers)


def test_host_defaults_to_the_urls_host_and_prometheus_to_port_9090() -> None:
    fleet = parse_fleet('[[server]]\nname = "a"\nurl = "http://gpu-box:8080"\nbackend = "openai"\n'
                        '[prometheus]\nurl = "http://metrics.lan"\n', BACKENDS)
    assert fleet.servers[0].host_label == "gpu-box"
    assert fleet.prometheus is not None and fleet.prometheus.base_url == "http://metrics.lan:9090"


def test_https_is_allowed_with_443_as_its_default_port() -> None:
    fleet = parse_fleet('[[server]]\nname = "a"\nurl = "https://vllm.example.org/v1"\nbackend = "openai"\n', BACKENDS)
    assert fleet.servers[0].base_url == "https://vllm.example.org:443/v1"
    assert [n.kind for n in fleet.notes] == [FleetNoteKind.BEYOND_LOOPBACK]


def test_a_url_beyond_loopback_is_allowed_but_noted_with_its_field_and_line() -> None:
    text = '[[server]]\nname = "a"\nurl = "http://127.0.0.1:1"\nbackend = "ollama"\n' \
           '[[server]]\nname = "b"\nbackend = "ollama"\nurl = "http://192.168.1.5:11434"\n'
    fleet = parse_fleet(text, BACKENDS)
    assert not fleet.servers[1].loopback
    assert [(n.kind, n.field, n.line) for n in fleet.notes] == [
        (FleetNoteKind.BEYOND_LOOPBACK, "server[1].url", 8),
        (FleetNoteKind.PLAIN_HTTP_BEYOND_LOOPBACK, "server[1].url", 8)]
    assert "192.168.1.5" in fleet.notes[0].text


def _error(text: str, backends: tuple[str, ...] = BACKENDS) -> FleetError:
    with pytest.raises(FleetError) as caught:
        parse_fleet(text, backends)
    return caught.value


def test_a_duplicate_name_names_both_entries_and_the_line() -> None:
    error = _error('[[server]]\nname = "a"\nurl = "http://127.0.0.1:1"\nbackend = "ollama"\n\n'
                   '[[server]]\nurl = "http://127.0.0.1:2"\nname = "a"\nbackend = "ollama"\n')
    assert (error.problem, error.field, error.line) == (FleetProblem.DUPLICATE_NAME, "server[1].name", 8)
    assert "server[0]" in error.message and error.hint == 'give each server its own name, e.g. name = "a-2"'
    assert error.user_text().startswith("line 8, server[1].name: ")


def test_an_unknown_backend_lists_the_known_names_passed_in() -> None:
    error = _error('[[server]]\nname = "a"\nurl = "http://127.0.0.1:1"\nbackend = "vllm"\n', ("ollama", "openai"))
    assert (error.problem, error.field, error.line) == (FleetProblem.UNKNOWN_BACKEND, "server[0].backend", 4)
    assert error.hint == "write one of: ollama | openai"


def test_a_balancer_naming_an_unknown_server_says_which_names_exist() -> None:
    error = _error('[[server]]\nname = "a"\nurl = "http://127.0.0.1:1"\nbackend = "ollama"\n'
                   '[balancer]\nname = "lb"\nurl = "http://127.0.0.1:8080"\nservers = ["a", "c"]\n')
    assert (error.problem, error.field, error.line) == (FleetProblem.UNKNOWN_BALANCED_SERVER, "balancer.servers", 8)
    assert "'c'" in error.message and error.hint.endswith(": a")


@pytest.mark.parametrize(("url", "why"), [
    ("ftp://127.0.0.1:21", "scheme ftp://"),
    ("http://user:pw@127.0.0.1:1", "passwords"),
    ("http://127.0.0.1:99999", "port"),
    ("http://127.0.0.1", "names no port"),
    ("", "empty"),
])
def test_a_url_that_is_not_http_s_with_a_port_is_refused_with_an_example(url: str, why: str) -> None:
    error = _error(f'[[server]]\nname = "a"\nbackend = "ollama"\nurl = {json.dumps(url)}\n')
    assert (error.problem, error.field, error.line) == (FleetProblem.BAD_URL, "server[0].url", 4)
    assert why in error.message
    assert "url = \"http://" in error.hint


@pytest.mark.parametrize(("text", "problem", "field", "line"), [
    ("[[server]\n", FleetProblem.NOT_TOML, "", 1),
    ("", FleetProblem.NO_SERVERS, "server", None),
    ('[server]\nname = "a"\n', FleetProblem.WRONG_TYPE, "server", 1),
    ('[[server]]\nname = "a"\nurl = "http://127.0.0.1:1"\nbackend = "ollama"\nport = 3\n',
     FleetProblem.UNKNOWN_KEY, "server[0].port", 5),
    ('[[server]]\nname = "a"\nbackend = "ollama"\n', FleetProblem.MISSING_FIELD, "server[0]", 1),
    ('[[server]]\nname = 3\n', FleetProblem.WRONG_TYPE, "server[0].name", 2),
    ('[[server]]\nname = "  "\n', FleetProblem.BAD_NAME, "server[0].name", 2),
    ('[clusters]\n', FleetProblem.UNKNOWN_KEY, "clusters", 1),
    ('[[server]]\nname = "a"\nurl = "http://127.0.0.1:1"\nbackend = "ollama"\n[balancer]\nname = "b"\n'
     'url = "http://127.0.0.1:2"\nservers = "a"\n', FleetProblem.WRONG_TYPE, "balancer.servers", 8),
])
def test_each_problem_is_typed_with_its_field_and_line(text: str, problem: FleetProblem, field: str,
                                                      line: int | None) -> None:
    error = _error(text)
    assert (error.problem, error.field, error.line) == (problem, field, line)
    assert error.hint  # always says what to write instead


# ---- hostile input: arbitrary TOML never raises anything but FleetError ----------------------------------

_keys = st.sampled_from(["name", "url", "backend", "host", "servers", "server", "balancer", "prometheus", "x"])
_scalars = st.one_of(
    st.text(max_size=30), st.sampled_from(["ollama", "openai", "http://127.0.0.1:1", "https://h", "a", "b"]),
    st.integers(), st.booleans(), st.floats(allow_nan=False, allow_infinity=False))
_values = st.recursive(_scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                           st.dictionaries(_keys, inner, max_size=4)), max_leaves=12)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a TOML basic string (a lone surrogate makes invalid TOML: also hostile input)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return "{" + ", ".join(f"{json.dumps(k)} = {_toml_value(v)}" for k, v in value.items()) + "}"


def _toml_document(tables: list[tuple[str, bool, dict[str, Any]]]) -> str:
    parts = []
    for name, array, body in tables:
        parts.append(f"[[{name}]]" if array else f"[{name}]")
        parts.extend(f"{json.dumps(k)} = {_toml_value(v)}" for k, v in body.items())
    return "\n".join(parts) + "\n"


_tables = st.lists(st.tuples(st.sampled_from(["server", "balancer", "prometheus", "other"]), st.booleans(),
                             st.dictionaries(_keys, _values, max_size=5)), max_size=5)


@settings(max_examples=400, deadline=None)
@given(_tables)
def test_arbitrary_toml_documents_raise_only_the_typed_error(tables: list[tuple[str, bool, dict[str, Any]]]) -> None:
    try:
        fleet = parse_fleet(_toml_document(tables), BACKENDS)
    except FleetError as error:
        assert isinstance(error.problem, FleetProblem) and error.hint
    else:
        assert fleet.servers and len({s.name for s in fleet.servers}) == len(fleet.servers)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_arbitrary_text_raises_only_the_typed_error(text: str) -> None:
    try:
        parse_fleet(text, BACKENDS)
    except FleetError as error:
        assert isinstance(error.problem, FleetProblem)
