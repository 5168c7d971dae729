"""ResourceType: what an ACL protects (Kafka's ``org.apache.kafka.common.resource.ResourceType``).

The codes are the protocol's (CreateAcls, DescribeAcls, DeleteAcls, and the
``authorized_operations`` bit fields); :attr:`ResourceType.acl_name` is the
PascalCase name ZooKeeper paths use (``/kafka-acl/Topic/...``), and
:meth:`ResourceType.parse` reads either that or the upper-case name, as
Kafka's SecurityUtils does.
"""

from __future__ import annotations

import enum

__all__ = ["ResourceType", "pascal_case"]


def pascal_case(name: str) -> str:
    """``TRANSACTIONAL_ID`` → ``TransactionalId`` (Kafka's SecurityUtils.toPascalCase)."""
    return "".join(part.capitalize() for part in name.split("_"))


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1  # filters only
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7

    @property
    def acl_name(self) -> str:
        return pascal_case(self.name)

    @classmethod
    def parse(cls, text: str) -> ResourceType:
        """``Topic``, ``TOPIC`` or ``topic``; ValueError for anything else."""
        key = text.strip().upper()
        for member in cls:
            if key in (member.name, member.acl_name.upper()):
                return member
        raise ValueError(f"unknown resource type {text!r}")

    @classmethod
    def of_code(cls, code: int) -> ResourceType:
        """The type of a protocol code; UNKNOWN for a code Kafka does not define."""
        try:
            return cls(code)
        except ValueError:
            return cls.UNKNOWN

    @property
    def is_specific(self) -> bool:
        """A type an ACL can be stored for (not a filter's ANY, not UNKNOWN)."""
        return self not in (ResourceType.ANY, ResourceType.UNKNOWN)
