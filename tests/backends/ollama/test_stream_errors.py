"""Ollama's one error mapping: transport failures, httpx failures of plain requests, error bodies and
in-band lines all become the app's typed errors with the same texts."""

from __future__ import annotations

import httpx
import pytest

from app.adapters.http.errors import (ConnectionDropped, ConnectRefused, ConnectTimeout, HttpStatusError,
                                      ProtocolViolation, ReadTimeout, TransportError, UnsupportedUrl)
from app.backends.ollama.stream import (StreamDropped, decode_line, error_for_httpx, error_for_transport,
                                        error_from_body, missing_final_line, require_streamable, translated_errors)
from app.core.errors import (BadRequest, MalformedResponse, ModelNotFound, ReplyUnfinished, ServerUnreachable,
                             ServerTimeout, OutOfMemory, QueueFull, ServerFault, StreamError, StreamOutOfMemory)
from tests.fakes.ollama.fake_ollama import QUEUE_FULL_MESSAGE

URL = "http://127.0.0.1:11434"


@pytest.mark.parametrize(("failure", "kind", "text"), [
    (ConnectRefused("x", URL, "Connection refused"), ServerUnreachable,
     f"Cannot connect to Ollama at {URL}: Connection refused"),
    (ConnectTimeout("x", URL, 3.0), ServerTimeout, f"Connecting to Ollama at {URL} timed out after 3 s"),
    (ReadTimeout("x", URL, 0.2), ServerTimeout, f"Ollama at {URL} sent nothing for 0.2 s"),
    (ConnectionDropped("x", URL, True), StreamDropped,
     f"Connection to Ollama at {URL} closed before the reply was complete"),
    (ConnectionDropped("x", URL, False), StreamDropped, f"Connection to Ollama at {URL} closed before replying"),
    (ProtocolViolation("not HTTP", URL), MalformedResponse, f"Ollama at {URL} did not answer valid HTTP: not HTTP"),
    (UnsupportedUrl("x", "https://example.com"), ServerUnreachable, "plain http://"),
    (TransportError("odd", URL), ServerUnreachable, f"HTTP failure talking to Ollama at {URL}: odd"),
])
def test_each_transport_failure_has_one_typed_error(failure: TransportError, kind: type, text: str) -> None:
    error = error_for_transport(failure)
    assert type(error) is kind and text in error.message


def test_httpx_failures_of_plain_requests_read_the_same_as_the_transports() -> None:
    request = httpx.Request("GET", URL)
    pairs = [(httpx.ConnectTimeout("t", request=request), ConnectTimeout("x", URL, 3.0)),
             (httpx.ReadTimeout("t", request=request), ReadTimeout("x", URL, 300.0)),
             (httpx.RemoteProtocolError("t", request=request), ConnectionDropped("x", URL, True))]
    for through_httpx, through_transport in pairs:
        via_httpx = error_for_httpx(through_httpx, URL, 3.0, 300.0)
        via_transport = error_for_transport(through_transport)
        assert type(via_httpx) is type(via_transport)
        assert via_httpx.message.startswith(via_transport.message)
    refused = error_for_httpx(httpx.ConnectError("Connection refused", request=request), URL, 3.0, 300.0)
    assert type(refused) is ServerUnreachable and refused.message == f"Cannot connect to Ollama at {URL}: Connection refused"


@pytest.mark.parametrize(("status", "text", "kind"), [
    (404, "model 'nope:1b' not found", ModelNotFound),
    (400, '"llama3.2:3b" does not support thinking', BadRequest),
    (500, "llama runner process has terminated: cudaMalloc failed: out of memory", OutOfMemory),
    (500, "llama runner process has terminated: exit status 2", ServerFault),
    (503, QUEUE_FULL_MESSAGE, QueueFull),
])
def test_an_error_status_keeps_ollamas_text_whichever_way_it_came(status: int, text: str, kind: type) -> None:
    body = b'{"error":%s}' % httpx.Response(200, json=text).content
    direct = error_from_body(status, body, URL)
    via_transport = error_for_transport(HttpStatusError("x", URL, status, body))
    for error in (direct, via_transport):
        assert type(error) is kind and error.message == text and error.status == status


def test_an_error_status_without_ollamas_json_is_malformed() -> None:
    error = error_for_transport(HttpStatusError("x", URL, 502, b"<html>Bad Gateway</html>"))
    assert type(error) is MalformedResponse and error.status == 502 and "HTTP 502" in error.message


def test_in_band_lines_raise_stream_errors_and_bad_lines_are_malformed() -> None:
    assert decode_line(b'{"done":false,"message":{"content":"a"}}', URL)["done"] is False
    with pytest.raises(StreamError, match="unexpected EOF") as info:
        decode_line(b'{"error":"unexpected EOF"}', URL)
    assert type(info.value) is StreamError
    with pytest.raises(StreamOutOfMemory):
        decode_line('{"error":"CUDA error: out of memory"}', URL)
    with pytest.raises(MalformedResponse, match="<html>"):
        decode_line(b"<html>", URL)
    with pytest.raises(MalformedResponse, match="not an object"):
        decode_line(b"[1, 2]", URL)


def test_translated_errors_keeps_the_cause_and_lets_typed_errors_through() -> None:
    refused = ConnectRefused("x", URL, "Connection refused")
    with pytest.raises(ServerUnreachable) as info:
        with translated_errors(URL, 3.0, 300.0):
            raise refused
    assert info.value.__cause__ is refused
    with pytest.raises(ModelNotFound):
        with translated_errors(URL, 3.0, 300.0):
            raise ModelNotFound("model 'x' not found")
    unfinished = missing_final_line(URL)
    assert isinstance(unfinished, ReplyUnfinished) and not isinstance(unfinished, StreamDropped)
    assert "without its final record (`done: true`)" in unfinished.message and isinstance(unfinished, StreamError)
    with pytest.raises(ServerUnreachable, match="plain http"):
        require_streamable("https://example.com")
    require_streamable(URL)
