"""Fixtures of the integration tests besides the shared ones (tests/conftest.py)."""

from tests.pg import histories, schema

__all__ = ["histories", "schema"]
