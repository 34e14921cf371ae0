"""Opening the server to others: the permission names a host, and one decision says whether a start may go ahead."""

from __future__ import annotations

import pytest
from hypothesis import given, settings as hypothesis_settings
from hypothesis import strategies as st

from app.backends.ollama.tuning import OLLAMA_TUNING
from app.core.server.exposure import assess, exposure_of, is_loopback, same_host
from app.core.server.mapping import NeutralTuning
from app.core.server.settings import ServerSettings, validate


@pytest.mark.parametrize("host, loopback", [
    ("127.0.0.1", True), ("127.0.0.2", True), ("localhost", True), ("LocalHost", True), ("::1", True),
    ("[::1]", True), ("0.0.0.0", False), ("::", False), ("192.168.1.5", False), ("deck.lan", False), ("", False),
])
def test_only_loopback_addresses_stay_on_this_machine(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback
    assert ServerSettings(host=host).exposed_to_network is not loopback


def test_same_host_compares_addresses_not_spellings() -> None:
    assert same_host("::", "0:0::0") and same_host("Deck.LAN", "deck.lan") and same_host("0.0.0.0", "0.0.0.0")
    assert not same_host("0.0.0.0", "192.168.1.5") and not same_host("", "") and not same_host("0.0.0.0", "")


def test_a_permission_for_0000_does_not_allow_another_host() -> None:
    allowed = ServerSettings(host="0.0.0.0", network_allowed_for="0.0.0.0")
    assert allowed.allow_network and exposure_of(allowed, NeutralTuning()).allowed
    moved = allowed.replace(host="192.168.1.5")
    assert moved.network_allowed_for == "" and not moved.allow_network
    assert not exposure_of(moved, NeutralTuning()).allowed
    assert "Allow network access on 192.168.1.5" in validate(moved).errors["host"]
    # Given for the other host outright, it is dropped too: a permission only ever names the current host.
    assert ServerSettings(host="192.168.1.5", network_allowed_for="0.0.0.0").network_allowed_for == ""
    assert not assess("192.168.1.5", 11434, "0.0.0.0").allowed
    assert assess("192.168.1.5", 11434, "192.168.1.5").allowed


def test_loopback_needs_no_permission_and_an_exposed_start_names_its_address() -> None:
    local = exposure_of(ServerSettings(port=11500), OLLAMA_TUNING)
    assert not local.exposed and local.allowed and local.warning() == "" and local.refusal() == ""
    open_ = exposure_of(ServerSettings(host="0.0.0.0", port=11500), OLLAMA_TUNING)
    assert open_.exposed and not open_.allowed
    assert "0.0.0.0:11500" in open_.refusal() and "not allowed for 0.0.0.0" in open_.refusal()
    assert "anyone who can reach 0.0.0.0:11500" in open_.warning()
    assert "delete your models" in open_.warning() and "no authentication" in open_.warning()
    assert exposure_of(ServerSettings(host="::", port=8080), NeutralTuning()).address == "[::]:8080"


def test_an_old_yes_no_permission_is_tied_to_the_host_saved_beside_it() -> None:
    settings, problems = ServerSettings.from_json({"host": "0.0.0.0", "port": 11500, "allow_network": True})
    assert problems == [] and settings.network_allowed_for == "0.0.0.0" and settings.allow_network
    assert validate(settings).ok
    # On loopback it allowed nothing, so it is dropped; false stays no permission.
    assert ServerSettings.from_json({"host": "127.0.0.1", "allow_network": True})[0].network_allowed_for == ""
    assert ServerSettings.from_json({"allow_network": True}) == (ServerSettings(), [])
    assert ServerSettings.from_json({"host": "0.0.0.0", "allow_network": False})[0].network_allowed_for == ""
    # A file that already has the new field keeps that, whatever the old key says.
    both = {"host": "0.0.0.0", "allow_network": True, "network_allowed_for": ""}
    assert ServerSettings.from_json(both)[0].network_allowed_for == ""
    # What is written is the host, never the old yes/no an older build would take for every host.
    data = settings.to_json()
    assert data["network_allowed_for"] == "0.0.0.0" and "allow_network" not in data
    assert ServerSettings.from_json(data) == (settings, [])


@pytest.mark.parametrize("origins", ["*", "http://*", "https://*.ngrok.io", "http://localhost,*", "'*'"])
def test_a_wildcard_ollama_origins_counts_as_exposure_even_on_loopback(origins: str) -> None:
    settings = ServerSettings(port=11500, extra_settings=f"OLLAMA_DEBUG=1\nOLLAMA_ORIGINS={origins}")
    exposure = exposure_of(settings, OLLAMA_TUNING)
    assert exposure.exposed and not exposure.network and not exposure.allowed
    assert "any web page you open" in exposure.warning() and "127.0.0.1:11500" in exposure.warning()
    refused = OLLAMA_TUNING.validate(settings)
    assert "OLLAMA_ORIGINS=" in refused.errors["network_allowed_for"]
    assert "Allow network access on 127.0.0.1" in refused.errors["network_allowed_for"]
    allowed = settings.allowing_network()
    assert allowed.network_allowed_for == "127.0.0.1" and exposure_of(allowed, OLLAMA_TUNING).allowed
    result = OLLAMA_TUNING.validate(allowed)
    assert result.ok and "any web page you open use the server" in result.warnings["extra_settings"]
    # The neutral mapping knows no origins: the decision asks the backend's mapping.
    assert not exposure_of(settings, NeutralTuning()).exposed


@pytest.mark.parametrize("origins", ["http://localhost:*", "app://*", "chrome-extension://abc", "http://deck.lan"])
def test_origins_without_a_wildcard_site_are_not_exposure(origins: str) -> None:
    settings = ServerSettings(extra_settings=f"OLLAMA_ORIGINS={origins}")
    assert not exposure_of(settings, OLLAMA_TUNING).exposed and OLLAMA_TUNING.validate(settings).ok


def test_ollama_host_in_the_extra_environment_cannot_move_the_bind_address() -> None:
    from app.backends.ollama.tuning import environment

    settings = ServerSettings(port=11500, extra_settings="OLLAMA_HOST=0.0.0.0:11500\nOLLAMA_NUM_PARALLEL=9")
    env = environment(settings)
    assert env["OLLAMA_HOST"] == "127.0.0.1:11500" and env["OLLAMA_NUM_PARALLEL"] == "1"
    assert "OLLAMA_HOST is set by the form (host and port); set it there" in \
        OLLAMA_TUNING.validate(settings).errors["extra_settings"]
    assert not exposure_of(settings, OLLAMA_TUNING).exposed


HOSTS = st.sampled_from(["0.0.0.0", "::", "0:0::0", "127.0.0.1", "127.0.0.9", "localhost", "::1", "192.168.1.5",
                         "deck.lan", "DECK.lan", ""]) | st.text(max_size=12)


def permission_follows_the_host(host: str, allowed_for: str, new_host: str) -> None:
    """The property: a permission is kept only for the host it names, and only it opens an exposed start."""
    settings = ServerSettings(host=host, network_allowed_for=allowed_for)
    assert settings.allow_network == same_host(allowed_for, host)
    exposure = exposure_of(settings, NeutralTuning())
    assert exposure.allowed == (is_loopback(host) or same_host(allowed_for, host))
    moved = settings.replace(host=new_host)
    assert moved.network_allowed_for == "" or same_host(moved.network_allowed_for, new_host)
    assert ServerSettings.from_json(moved.to_json()) == (moved, [])


@hypothesis_settings(max_examples=150, deadline=None)
@given(HOSTS, HOSTS, HOSTS)
def test_a_permission_follows_its_host_whatever_the_hosts(host: str, allowed_for: str, new_host: str) -> None:
    permission_follows_the_host(host, allowed_for, new_host)
