"""What became of a sweep's points and runs, as types: a point's status, a run's status, and why a point
was not measured (or not cleanly), with the words people see for each written here once.

The enums' values are the words the histories, the JSON and the CSV exports have always saved, so a
saved "failed" reads back as PointStatus.FAILED and is written out as "failed" again. A point's failure
kind is not saved: it is set where the failure is caught, and read back from what a saved point holds
(see failure_of_saved).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum


class PointStatus(StrEnum):
    """A point's outcome, in the words of the results table's "stable?" column."""

    OK = "ok"  # ran, enough requests succeeded
    # ran, but too many requests failed (e.g. an occasional OOM, 503s), or something else competed for
    # the device meanwhile (see PointResult.contention)
    UNSTABLE = "unstable"
    FAILED = "failed"  # crashed, out of memory at load, spilled to the CPU, or no request succeeded
    SKIPPED = "skipped"  # not run: predicted not to load, or invalid settings
    CANCELLED = "cancelled"


class RunStatus(StrEnum):
    """Where a sweep run stands."""

    RUNNING = "running"
    FINISHED = "finished"
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"  # the process ended mid-sweep (found so in the history)
    UNREADABLE = "unreadable"  # a history row too damaged to say (listed, never saved)


class FailureKind(StrEnum):
    """Why a point was skipped, failed or ran unstably; each is set where that is found out."""

    INVALID_SETTINGS = "invalid_settings"  # skipped: the estimator cannot price these settings for the model
    PREDICTED_SPILL = "predicted_spill"  # skipped: predicted to spill to the CPU
    PREDICTED_OUT_OF_MEMORY = "predicted_out_of_memory"  # skipped: predicted to run the computer out of RAM
    PREDICTED_WONT_LOAD = "predicted_wont_load"  # skipped: predicted not to fit on the GPU
    NO_START = "no_start"  # the server did not start with the point's settings
    OUT_OF_MEMORY = "out_of_memory"  # the server ran out of GPU memory (at load, or on every request)
    HOST_OUT_OF_MEMORY = "host_out_of_memory"  # the kernel killed the model's runner for the computer's RAM
    CRASHED = "crashed"  # the server crashed, at load or during the run
    LOAD_ERROR = "load_error"  # the model did not load, in the server's own words
    SPILLED = "spilled"  # the loaded model sat partly on the CPU, at load or during the run
    # Requests that failed, by the load generator's error class (every one, or too many: unstable).
    SERVER_BUSY = "server_busy"
    TIMEOUT = "timeout"
    UNREACHABLE = "unreachable"
    DROPPED = "dropped"  # the connection closed mid-reply
    UNFINISHED = "unfinished"  # the server ended replies properly but without their final record
    SERVER_ERROR = "server_error"
    BAD_REQUEST = "bad_request"
    MODEL_NOT_FOUND = "model_not_found"
    MALFORMED_REPLY = "malformed_reply"
    REQUEST_ERROR = "request_error"
    # The server cut the prompt (counted fewer prompt tokens than were sent) or refused it as longer than a
    # slot's context: the answers are not to the prompt asked, so the point fails whatever its speed.
    TRUNCATED = "truncated"
    PROMPT_TOO_LONG = "prompt_too_long"
    CONTENDED = "contended"  # unstable: other programs competed for the device while it was measured
    # unstable: the server did something meanwhile that skews the figures (layers on the CPU, a cold load, a
    # restart, the GPU slowing down: see PointResult.spoiled_by for which)
    SPOILED = "spoiled"
    CANCELLED = "cancelled"


@dataclass(frozen=True)
class FailureWords:
    """A failure kind for people: the results table's few words, and the chart's one-word mark."""

    cell: str
    mark: str


_OOM = FailureWords("OOM", "OOM")
_FAILED = FailureWords("failed", "failed")
_PREDICTED = "skipped (estimate)"
# Every kind's words, the only place they are written.
FAILURE_WORDS: Mapping[FailureKind, FailureWords] = {
    FailureKind.INVALID_SETTINGS: FailureWords("skipped", "skipped"),
    FailureKind.PREDICTED_SPILL: FailureWords(_PREDICTED, "spill"),
    FailureKind.PREDICTED_OUT_OF_MEMORY: FailureWords(_PREDICTED, "OOM"),
    FailureKind.PREDICTED_WONT_LOAD: FailureWords(_PREDICTED, "skipped"),
    FailureKind.NO_START: FailureWords("no start", "failed"),
    FailureKind.OUT_OF_MEMORY: _OOM,
    FailureKind.HOST_OUT_OF_MEMORY: _OOM,
    FailureKind.CRASHED: FailureWords("crashed", "failed"),
    FailureKind.LOAD_ERROR: _FAILED,
    FailureKind.SPILLED: FailureWords("CPU spill", "spill"),
    FailureKind.SERVER_BUSY: _FAILED,
    FailureKind.TIMEOUT: _FAILED,
    FailureKind.UNREACHABLE: _FAILED,
    FailureKind.DROPPED: _FAILED,
    FailureKind.UNFINISHED: FailureWords("replies cut", "cut"),
    FailureKind.SERVER_ERROR: _FAILED,
    FailureKind.BAD_REQUEST: _FAILED,
    FailureKind.MODEL_NOT_FOUND: _FAILED,
    FailureKind.MALFORMED_REPLY: _FAILED,
    FailureKind.REQUEST_ERROR: _FAILED,
    FailureKind.TRUNCATED: FailureWords("truncated", "truncated"),
    FailureKind.PROMPT_TOO_LONG: FailureWords("prompt too long", "too long"),
    FailureKind.CONTENDED: FailureWords("contended", "contended"),
    FailureKind.SPOILED: FailureWords("server event", "event"),
    FailureKind.CANCELLED: FailureWords("cancelled", "cancelled"),
}

# The load generator's error class of a request (RequestRecord.error_kind) -> the failure it makes,
# and its words in a point's reason ("every request failed (timed out)").
REQUEST_FAILURES: Mapping[str, FailureKind] = {
    "oom": FailureKind.OUT_OF_MEMORY, "queue_full": FailureKind.SERVER_BUSY, "timeout": FailureKind.TIMEOUT,
    "connect": FailureKind.UNREACHABLE, "dropped": FailureKind.DROPPED, "unfinished": FailureKind.UNFINISHED,
    "server": FailureKind.SERVER_ERROR,
    "bad_request": FailureKind.BAD_REQUEST, "not_found": FailureKind.MODEL_NOT_FOUND,
    "malformed": FailureKind.MALFORMED_REPLY, "other": FailureKind.REQUEST_ERROR,
    "truncated": FailureKind.TRUNCATED, "too_long": FailureKind.PROMPT_TOO_LONG}
ERROR_WORDS: Mapping[str, str] = {
    "oom": "out of memory", "queue_full": "server busy (queue full)", "timeout": "timed out",
    "connect": "connection refused", "dropped": "connection dropped",
    "unfinished": "reply ended without its final record", "server": "server error",
    "bad_request": "refused as bad request", "not_found": "model not found", "malformed": "malformed reply",
    "other": "other error", "truncated": "prompt truncated by the server",
    "too_long": "prompt longer than the context per slot"}
# The request classes that say the prompt did not reach the model whole: a point with any of them fails.
PROMPT_CUT_ERRORS = ("truncated", "too_long")


def unfinished_words(tokens: int) -> str:
    """A reply the server ended properly without its final record: "the server ended the reply without its final
    record, after 37 tokens"."""
    return f"the server ended the reply without its final record, after {tokens} token{'s' if tokens != 1 else ''}"


# How many prompt tokens the server may count fewer than expected before a request counts as truncated:
# chat templates and tokenizers differ by a few tokens (a begin-of-text token, a default system prompt).
TRUNCATION_TOLERANCE_TOKENS = 16
TRUNCATION_TOLERANCE_SHARE = 0.1


def is_truncated(expected_tokens: int | None, delivered_tokens: int | None) -> bool:
    """True when the server used clearly fewer prompt tokens than were sent: fewer than `expected_tokens` less
    a small tolerance (TRUNCATION_TOLERANCE_TOKENS or TRUNCATION_TOLERANCE_SHARE of it, the larger). Unknown
    on either side is no claim."""
    if expected_tokens is None or delivered_tokens is None or expected_tokens <= 0:
        return False
    tolerance = max(TRUNCATION_TOLERANCE_TOKENS, round(expected_tokens * TRUNCATION_TOLERANCE_SHARE))
    return delivered_tokens < expected_tokens - tolerance


def truncated_words(used: int, expected: int) -> str:
    """A truncated request's error text: "truncated by the server: 130 of 612 prompt tokens used"."""
    return f"truncated by the server: {used} of {expected} prompt tokens used"


def too_long_words(prompt_tokens: int | None, context_tokens: int | None) -> str:
    """A prompt the server refused as longer than a slot's context, with its numbers where it gave them."""
    if prompt_tokens is None or context_tokens is None:
        return "refused by the server: the prompt is longer than the context per slot"
    return (f"refused by the server: the prompt is {prompt_tokens} tokens, the context per slot "
            f"{context_tokens}")

# The reasons a point's failure is saved with (PointResult.reason): the sentences the sweep writes, and
# so what failure_of_saved reads a saved point's kind back from.
REASONS: Mapping[FailureKind, str] = {
    FailureKind.INVALID_SETTINGS: "invalid for this model",
    FailureKind.NO_START: "server did not start",
    FailureKind.OUT_OF_MEMORY: "out of memory at load",
    FailureKind.HOST_OUT_OF_MEMORY: "the computer ran out of memory at load",
    FailureKind.LOAD_ERROR: "model did not load",
}
CRASHED_AT_LOAD = "server crashed at load"
CRASHED_DURING_RUN = "server crashed during the run"
EVERY_REQUEST_FAILED = "every request failed"  # then the first error class's words in brackets
PROMPTS_CUT = "prompts cut by the server"  # then how many of how many requests, in brackets
SPOILED_BY = "not stable"  # then ": " and the events' kinds in words ("not stable: layers on the CPU")
# Beginnings of reasons with numbers after them.
REASON_STARTS: tuple[tuple[str, FailureKind], ...] = (
    ("predicted to spill to CPU", FailureKind.PREDICTED_SPILL),
    ("predicted to run the computer out of memory", FailureKind.PREDICTED_OUT_OF_MEMORY),
    ("predicted not to load", FailureKind.PREDICTED_WONT_LOAD),
    ("spilled to CPU", FailureKind.SPILLED),
)


def request_failure(errors: Mapping[str, int], most_common: bool = False) -> FailureKind:
    """The failure a point's failed requests make: of the first error class met (or, with most_common,
    the one met most often); an unknown class is a REQUEST_ERROR."""
    if not errors:
        return FailureKind.REQUEST_ERROR
    kind = max(errors, key=lambda k: errors[k]) if most_common else next(iter(errors))
    return REQUEST_FAILURES.get(kind, FailureKind.REQUEST_ERROR)


def failure_of_saved(status: PointStatus, reason: str, errors: Mapping[str, int] | None,
                     contended_text: str) -> FailureKind | None:
    """A saved point's failure kind, from what it holds: its status, the reason the sweep wrote (see
    REASONS), its requests' error classes and, for a contended point, its contention's short text."""
    if status is PointStatus.OK:
        return None
    if status is PointStatus.CANCELLED:
        return FailureKind.CANCELLED
    if status is PointStatus.UNSTABLE:
        if contended_text and reason == contended_text:
            return FailureKind.CONTENDED
        if reason.startswith(SPOILED_BY):
            return FailureKind.SPOILED
        return request_failure(errors or {}, most_common=True)
    known = next((kind for kind, words in REASONS.items() if reason == words), None)
    if known is not None:
        return known
    if reason in (CRASHED_AT_LOAD, CRASHED_DURING_RUN):
        return FailureKind.CRASHED
    known = next((kind for start, kind in REASON_STARTS if reason.startswith(start)), None)
    if known is not None:
        return known
    if status is PointStatus.SKIPPED:
        return FailureKind.INVALID_SETTINGS
    if reason.startswith(PROMPTS_CUT):
        cut = {k: n for k, n in (errors or {}).items() if k in PROMPT_CUT_ERRORS}
        return request_failure(cut, most_common=True) if cut else FailureKind.TRUNCATED
    if reason.startswith(EVERY_REQUEST_FAILED):
        return request_failure(errors or {})
    return FailureKind.LOAD_ERROR


def saved_point_status(value: object) -> PointStatus:
    """A point status as saved; one it does not know (or none) reads as failed."""
    try:
        return PointStatus(value) if isinstance(value, str) else PointStatus.FAILED
    except ValueError:
        return PointStatus.FAILED


def saved_run_status(value: object) -> RunStatus:
    """A run status as saved; one it does not know reads as unreadable."""
    try:
        return RunStatus(value) if isinstance(value, str) else RunStatus.UNREADABLE
    except ValueError:
        return RunStatus.UNREADABLE


__all__ = ["CRASHED_AT_LOAD", "CRASHED_DURING_RUN", "ERROR_WORDS", "EVERY_REQUEST_FAILED", "FAILURE_WORDS", "FailureKind", "FailureWords",
           "PROMPTS_CUT", "PROMPT_CUT_ERRORS", "SPOILED_BY", "PointStatus", "REASONS", "REASON_STARTS", "REQUEST_FAILURES",
           "RunStatus", "TRUNCATION_TOLERANCE_SHARE", "TRUNCATION_TOLERANCE_TOKENS", "failure_of_saved",
           "is_truncated", "request_failure", "saved_point_status", "saved_run_status", "too_long_words",
           "truncated_words", "unfinished_words"]
