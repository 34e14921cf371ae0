"""The old Ollama-named errors stay importable, as the same classes, for one release."""

from app.backends.ollama.errors import OllamaConnectError, OllamaError, OllamaTimeout
from app.core.errors import ServerError, ServerTimeout, ServerUnreachable, error_for_status


def test_the_old_names_are_the_new_classes():
    assert OllamaError is ServerError
    assert OllamaConnectError is ServerUnreachable
    assert OllamaTimeout is ServerTimeout


def test_code_catching_the_old_name_still_catches_every_server_error():
    for status in (400, 404, 500, 503, 418):
        try:
            raise error_for_status(status, "boom")
        except OllamaError as exc:
            assert exc.message == "boom"
