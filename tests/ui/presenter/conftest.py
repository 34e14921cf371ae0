"""The presenter's fixtures: the window's composition root in demo mode (tests/ui/app's factory)."""

from tests.ui.app.conftest import deck_factory  # noqa: F401 - the fixture
