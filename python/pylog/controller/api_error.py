"""ApiError: an error code and message for a partition or a whole request, as
the controller answers its APIs (Kafka's ``ApiError``)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ApiError"]


@dataclass(frozen=True)
class ApiError:
    """An error code and message for a partition (or a whole request):
    Kafka's ApiError."""

    error_code: int
    message: str | None = None
