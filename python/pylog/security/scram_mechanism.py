"""ScramMechanism: the SCRAM mechanisms Kafka speaks (RFC 5802 / RFC 7677).

Each has the name clients ask for in SaslHandshake, the type id the admin
APIs carry (DescribeUserScramCredentials, AlterUserScramCredentials:
UNKNOWN 0, SCRAM-SHA-256 1, SCRAM-SHA-512 2), its hash, and Kafka's iteration
bounds: a credential of fewer than 4096 iterations is refused at login and
when stored, one of more than 16384 when stored.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Callable
from typing import Any

__all__ = ["MAX_ITERATIONS", "MIN_ITERATIONS", "ScramMechanism"]

MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384


class ScramMechanism(enum.Enum):
    SCRAM_SHA_256 = ("SCRAM-SHA-256", 1, "sha256")
    SCRAM_SHA_512 = ("SCRAM-SHA-512", 2, "sha512")

    def __init__(self, mechanism_name: str, type_id: int, hash_name: str) -> None:
        self.mechanism_name = mechanism_name
        self.type_id = type_id
        self.hash_name = hash_name

    @property
    def hash(self) -> Callable[..., Any]:
        """The hashlib constructor (what ``hmac`` takes as digestmod)."""
        return getattr(hashlib, self.hash_name)  # type: ignore[no-any-return]

    @property
    def min_iterations(self) -> int:
        return MIN_ITERATIONS

    @classmethod
    def by_name(cls, name: str) -> ScramMechanism | None:
        for m in cls:
            if m.mechanism_name == name:
                return m
        return None

    @classmethod
    def by_type(cls, type_id: int) -> ScramMechanism | None:
        for m in cls:
            if m.type_id == type_id:
                return m
        return None

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(m.mechanism_name for m in cls)
