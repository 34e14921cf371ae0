"""Every error class the load generator records for a request has a failure kind and words."""

from __future__ import annotations

from app.core.bench.outcome import ERROR_WORDS, REQUEST_FAILURES, FailureKind
from app.core.errors import (BadRequest, ContextExceeded, MalformedResponse, ModelNotFound, OutOfMemory, QueueFull, ServerFault,
                             ReplyUnfinished, ServerTimeout, ServerUnreachable, StreamDropped, StreamError)
from app.services.bench.loadgen import error_kind_of


def test_each_request_error_class_is_a_failure_kind_with_words() -> None:
    errors = [OutOfMemory("cudaMalloc failed"), QueueFull("busy"), ServerTimeout("slow"), TimeoutError(),
              ServerUnreachable("refused"), StreamDropped("closed"), ModelNotFound("gone"), BadRequest("no"),
              MalformedResponse("odd"), ServerFault("500"), StreamError("mid-reply"), RuntimeError("other"),
              ContextExceeded("too long", prompt_tokens=631, context_tokens=256), ReplyUnfinished("no done record")]
    # "truncated" is no exception's: the load generator sets it when the server used fewer prompt tokens than sent.
    classes = {error_kind_of(exc) for exc in errors} | {"truncated"}
    assert classes == set(REQUEST_FAILURES) == set(ERROR_WORDS)
    assert REQUEST_FAILURES[error_kind_of(ContextExceeded("x"))] is FailureKind.PROMPT_TOO_LONG
    assert REQUEST_FAILURES["truncated"] is FailureKind.TRUNCATED
    assert REQUEST_FAILURES[error_kind_of(OutOfMemory("x"))] is FailureKind.OUT_OF_MEMORY
    assert REQUEST_FAILURES[error_kind_of(ServerUnreachable("x"))] is FailureKind.UNREACHABLE
    # A reply the server ended properly without its final record is not a dropped connection, and says so.
    assert REQUEST_FAILURES[error_kind_of(ReplyUnfinished("x"))] is FailureKind.UNFINISHED
    assert REQUEST_FAILURES[error_kind_of(StreamDropped("x"))] is FailureKind.DROPPED
    assert ERROR_WORDS["unfinished"] == "reply ended without its final record"
