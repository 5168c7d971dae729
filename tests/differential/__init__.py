"""Kafka as the oracle: the differential tests (a package, so that its
conftest does not shadow tests/conftest.py, which other tests import)."""
