"""llama-server's one error mapping: its recorded error bodies, transport and httpx failures."""

from __future__ import annotations

import httpx
import pytest

from app.adapters.http.errors import (ConnectionDropped, ConnectRefused, ConnectTimeout, HttpStatusError,
                                      ProtocolViolation, ReadTimeout, UnsupportedUrl)
from app.backends.llama_server.errors import (error_for_httpx, error_for_transport, error_from_body,
                                              require_streamable)
from app.core.errors import (BadRequest, ContextExceeded, MalformedResponse, ModelNotFound, ServerUnreachable, ServerTimeout,
                             OutOfMemory, ServerFault, StreamDropped)
from tests.fakes.llama_server.replay import INDEX, recorded

URL = "http://127.0.0.1:8080"


def test_a_too_long_prompt_says_both_token_counts_and_what_to_change() -> None:
    error = error_from_body(INDEX["error_context.json"]["status"], recorded("error_context.json"), URL)
    # A refused request (its own sign that the prompt did not fit), with both numbers for the load generator.
    assert type(error) is ContextExceeded and isinstance(error, BadRequest) and error.status == 400
    assert (error.prompt_tokens, error.context_tokens) == (431, 256)
    assert "exceeds the available context size (256 tokens)" in error.message
    assert "431 tokens" in error.hint and "256" in error.hint and "context length" in error.hint


def test_loading_model_says_to_wait_for_health() -> None:
    error = error_from_body(INDEX["error_loading.json"]["status"], recorded("error_loading.json"), URL)
    assert type(error) is ServerFault and error.status == 503
    assert error.message == "llama-server: Loading model" and "/health" in error.hint


@pytest.mark.parametrize(("status", "body", "kind"), [
    (404, b'{"error":{"code":404,"message":"model not found","type":"not_found_error"}}', ModelNotFound),
    (500, b'{"error":{"code":500,"message":"failed to allocate compute buffers","type":"server_error"}}',
     OutOfMemory),
    (500, b'{"error":{"code":500,"message":"decode failed","type":"server_error"}}', ServerFault),
    (401, b'{"error":{"code":401,"message":"Invalid API Key","type":"authentication_error"}}', BadRequest),
    (400, b'{"error":"a bare string"}', BadRequest),
    (502, b"<html>bad gateway</html>", MalformedResponse),
])
def test_each_error_body_has_one_typed_error_keeping_the_servers_text(status: int, body: bytes, kind: type) -> None:
    error = error_from_body(status, body, URL)
    assert type(error) is kind and error.status == status
    if kind is not MalformedResponse:
        assert error.message.startswith("llama-server: ")


@pytest.mark.parametrize(("failure", "kind", "text"), [
    (ConnectRefused("x", URL, "Connection refused"), ServerUnreachable,
     f"Cannot connect to llama-server at {URL}: Connection refused"),
    (ConnectTimeout("x", URL, 3.0), ServerTimeout, f"Connecting to llama-server at {URL} timed out after 3 s"),
    (ReadTimeout("x", URL, 0.2), ServerTimeout, f"llama-server at {URL} sent nothing for 0.2 s"),
    (ConnectionDropped("x", URL, True), StreamDropped,
     f"Connection to llama-server at {URL} closed before the reply was complete"),
    (ProtocolViolation("not HTTP", URL), MalformedResponse, "did not answer valid HTTP"),
    (UnsupportedUrl("x", "https://example.com"), ServerUnreachable, "plain http://"),
    (HttpStatusError("x", URL, 503, recorded("error_loading.json")), ServerFault, "Loading model"),
])
def test_each_transport_failure_has_one_typed_error(failure: Exception, kind: type, text: str) -> None:
    error = error_for_transport(failure)  # type: ignore[arg-type]
    assert type(error) is kind and text in error.message


def test_httpx_failures_read_as_the_transports_do() -> None:
    request = httpx.Request("GET", URL)
    assert type(error_for_httpx(httpx.ConnectError("refused", request=request), URL, 3, 300)) is ServerUnreachable
    assert type(error_for_httpx(httpx.ReadTimeout("t", request=request), URL, 3, 300)) is ServerTimeout
    assert type(error_for_httpx(httpx.RemoteProtocolError("cut", request=request), URL, 3, 300)) is StreamDropped


def test_an_unusable_url_is_refused_before_anything_is_sent() -> None:
    with pytest.raises(ServerUnreachable, match="plain http://"):
        require_streamable("https://127.0.0.1:8080")
