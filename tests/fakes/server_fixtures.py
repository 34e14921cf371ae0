"""Pytest fixtures (registered in tests/conftest.py)."""
