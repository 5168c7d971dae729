"""AclOperation: what an ACL allows or denies (Kafka's ``AclOperation``).

Codes are the protocol's; :attr:`AclOperation.acl_name` is the PascalCase
name of ZooKeeper's ACL JSON (``"operation": "DescribeConfigs"``).
:func:`implied_by` is Kafka's inheritance: an ALLOW of READ, WRITE, DELETE or
ALTER allows DESCRIBE too, ALTER_CONFIGS allows DESCRIBE_CONFIGS, and ALL
allows everything (a DENY denies only its own operation, or all with ALL).
"""

from __future__ import annotations

import enum

from pylog.security.resource_type import pascal_case

__all__ = ["AclOperation", "implied_by"]


class AclOperation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1  # filters only
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14

    @property
    def acl_name(self) -> str:
        return pascal_case(self.name)

    @classmethod
    def parse(cls, text: str) -> AclOperation:
        """``Read``, ``READ``, ``IdempotentWrite`` or ``IDEMPOTENT_WRITE``."""
        key = text.strip().upper()
        for member in cls:
            if key in (member.name, member.acl_name.upper()):
                return member
        raise ValueError(f"unknown operation {text!r}")

    @classmethod
    def of_code(cls, code: int) -> AclOperation:
        try:
            return cls(code)
        except ValueError:
            return cls.UNKNOWN


_IMPLIED: dict[AclOperation, frozenset[AclOperation]] = {
    AclOperation.DESCRIBE: frozenset(
        {
            AclOperation.DESCRIBE,
            AclOperation.READ,
            AclOperation.WRITE,
            AclOperation.DELETE,
            AclOperation.ALTER,
        }
    ),
    AclOperation.DESCRIBE_CONFIGS: frozenset(
        {AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}
    ),
}


def implied_by(operation: AclOperation) -> frozenset[AclOperation]:
    """The operations whose ALLOW allows ``operation`` (ALL aside)."""
    return _IMPLIED.get(operation, frozenset({operation}))
