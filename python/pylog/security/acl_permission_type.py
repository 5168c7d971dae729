"""AclPermissionType: ALLOW or DENY (Kafka's ``AclPermissionType``); DENY wins."""

from __future__ import annotations

import enum

from pylog.security.resource_type import pascal_case

__all__ = ["AclPermissionType"]


class AclPermissionType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1  # filters only
    DENY = 2
    ALLOW = 3

    @property
    def acl_name(self) -> str:
        """``Allow`` / ``Deny``, as ZooKeeper's ACL JSON spells it."""
        return pascal_case(self.name)

    @classmethod
    def parse(cls, text: str) -> AclPermissionType:
        try:
            return cls[text.strip().upper()]
        except KeyError:
            raise ValueError(f"unknown permission type {text!r}") from None

    @classmethod
    def of_code(cls, code: int) -> AclPermissionType:
        try:
            return cls(code)
        except ValueError:
            return cls.UNKNOWN
