"""The one server-URL parser: what it accepts and normalises, what it refuses and why."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.server.url import ServerUrl, ServerUrlError, default_port, parse_server_url


@pytest.mark.parametrize(("text", "base_url"), [
    ("http://127.0.0.1:11434", "http://127.0.0.1:11434"),
    ("127.0.0.1:11500", "http://127.0.0.1:11500"),
    ("localhost", "http://localhost:11434"),  # the server's default port, not HTTP's 80
    ("http://gpu-box", "http://gpu-box:11434"),
    ("HTTP://Gpu-Box:1/", "http://Gpu-Box:1"),
    ("  http://h:80  ", "http://h:80"),  # pasted with spaces around
    ("http://[::1]", "http://[::1]:11434"),
    ("[fe80::1%eth0]:8080", "http://[fe80::1%eth0]:8080"),
    ("http://h:65535/ollama/", "http://h:65535/ollama"),  # a reverse proxy's prefix is kept
    ("http://h/a/b", "http://h:11434/a/b"),
    ("http://ollama_server.local.:11434", "http://ollama_server.local.:11434"),
])
def test_accepted_urls_and_their_normal_form(text: str, base_url: str) -> None:
    assert parse_server_url(text).base_url == base_url


def test_the_parts_and_the_default_port() -> None:
    url = parse_server_url("http://[::1]:8080/p")
    assert url == ServerUrl("http", "::1", 8080, "/p") and url.authority == "[::1]:8080"
    assert default_port() == 11434 and parse_server_url("h", port=9000).port == 9000


@pytest.mark.parametrize(("text", "reason"), [
    ("", "it is empty"),
    ("http://", "the host is missing"),
    ("http://127.0.0.1:99999", "the port '99999' is not a number from 1 to 65535"),
    ("http://127.0.0.1:0", "the port '0' is not a number from 1 to 65535"),
    ("http://127.0.0.1:abc", "the port 'abc' is not a number from 1 to 65535"),
    ("http://h:", "the port after ':' is missing"),
    ("::::", "an IPv6 address goes in brackets"),
    ("::1", "an IPv6 address goes in brackets"),
    ("http://[::1", "has no ']'"),
    ("http://[zz::1]:80", "[zz::1] is not an IPv6 address"),
    ("http://[::1]x", "'x' after the IPv6 address is not ':PORT'"),
    ("ftp://h", "the scheme ftp:// is not supported"),
    ("http:/h", "write the scheme as http:// (two slashes)"),
    ("http://user:pw@h", "user names and passwords"),
    ("http://h/?x=1", "no query"),
    ("http://h#top", "no query (?…) or fragment (#…)"),
    ("99999", "'99999' is not an IPv4 address"),
    ("http://1.2.3.256", "'1.2.3.256' is not an IPv4 address"),
    ("http://-h-", "'-h-' is not a host name or IP address"),
    ("http://a b", "printable ASCII without spaces"),
    ("http://dé.fr", "xn-- form"),
    ("http://h/pa th", "printable ASCII without spaces"),
    ("http://h/a\"b", "has characters a URL path cannot hold"),
])
def test_refusals_say_why(text: str, reason: str) -> None:
    with pytest.raises(ServerUrlError) as refused:
        parse_server_url(text)
    assert reason in refused.value.message and "is not a server URL" in refused.value.message
    assert "\n" not in refused.value.user_text()


def test_https_is_refused_unless_allowed() -> None:
    with pytest.raises(ServerUrlError, match="https is not supported; ollama-deck talks plain http://"):
        parse_server_url("https://h/p")
    assert parse_server_url("https://h/p", allow_https=True).base_url == "https://h:11434/p"


def test_a_path_is_refused_where_only_host_and_port_can_be_kept() -> None:
    with pytest.raises(ServerUrlError, match="a path"):
        parse_server_url("http://h:1/ollama", allow_path=False)
    assert parse_server_url("http://h:1/", allow_path=False).path == ""


def test_it_is_a_value_error_too() -> None:
    # Callers that caught ValueError from the old ad-hoc parsing keep working.
    with pytest.raises(ValueError):
        parse_server_url("http://")


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40) | st.from_regex(r"(https?://)?\[?[0-9a-f:.]{0,12}\]?(:\d{0,6})?(/[a-z/]{0,6})?",
                                              fullmatch=True))
def test_any_text_is_a_url_or_a_reason_and_accepted_ones_are_stable(text: str) -> None:
    try:
        url = parse_server_url(text)
    except ServerUrlError as exc:
        assert exc.message and "\n" not in exc.message
        return
    assert 1 <= url.port <= 65535 and url.scheme == "http" and not url.path.endswith("/")
    assert parse_server_url(url.base_url) == url


def test_settings_for_url_takes_host_and_port():
    from app.core.server.settings import ServerSettings
    from app.core.server.url import settings_for_url

    s = settings_for_url(ServerSettings(), "http://192.168.1.5:11500")
    assert (s.host, s.port) == ("192.168.1.5", 11500)
    assert settings_for_url(ServerSettings(), "localhost").port == 11434
