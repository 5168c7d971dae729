"""PatternType: how an ACL's resource name matches (Kafka's ``PatternType``).

An ACL is LITERAL (the name exactly, or ``*`` for every resource of its type)
or PREFIXED (every name starting with it). A filter may also say ANY (either
kind, the name compared as given) or MATCH (every pattern that would apply to
a resource of that name: the literal name, the wildcard, and each prefix).
"""

from __future__ import annotations

import enum

__all__ = ["PatternType"]


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4

    @property
    def is_specific(self) -> bool:
        """What a stored ACL can be: LITERAL or PREFIXED."""
        return self in (PatternType.LITERAL, PatternType.PREFIXED)

    @classmethod
    def of_code(cls, code: int) -> PatternType:
        try:
            return cls(code)
        except ValueError:
            return cls.UNKNOWN

    @classmethod
    def parse(cls, text: str) -> PatternType:
        try:
            return cls[text.strip().upper()]
        except KeyError:
            raise ValueError(f"unknown pattern type {text!r}") from None
