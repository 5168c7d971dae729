"""pylog: a Kafka-compatible message broker you install with pip."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("pylog-broker")  # the distribution name (pyproject.toml)
except PackageNotFoundError:  # running from a source tree without install
    __version__ = "0.0.0"

__all__ = ["__version__"]
