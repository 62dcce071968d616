"""The `world` fixture (tests/unit/api/test_api.py), for tests here that ask for it without importing it."""

from tests.unit.api.test_api import world

__all__ = ["world"]
