"""ClientQuotaEntity: whom a client quota applies to — a user, a client id, a
user and one of their client ids, or an IP address (KIP-612), each either
named or the default (Kafka's ``org.apache.kafka.common.quota.ClientQuotaEntity``
as its ZooKeeper-mode brokers keep it).

Names are kept as ZooKeeper keeps them: URL-encoded by Kafka's Sanitizer, with
``<default>`` for the default entity. An encoded name never contains ``<``, so
a user literally called ``<default>`` stays a user of its own
(``%3Cdefault%3E``), as in Kafka. The znodes:

* ``/config/users/<user>`` and ``/config/users/<default>``;
* ``/config/users/<user>/clients/<client-id>`` (either side may be ``<default>``);
* ``/config/clients/<client-id>`` and ``/config/clients/<default>``;
* ``/config/ips/<ip>`` and ``/config/ips/<default>`` (``connection_creation_rate``).

Each holds ``{"version":1,"config":{"producer_byte_rate":"1024",...}}`` (a
user's node holds its SCRAM credentials too).
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass

__all__ = [
    "CLIENT_ID",
    "CONNECTION_CREATION_RATE",
    "CONSUMER_BYTE_RATE",
    "CONTROLLER_MUTATION_RATE",
    "DEFAULT",
    "IP",
    "IP_QUOTA_KEYS",
    "PRODUCER_BYTE_RATE",
    "QUOTA_KEYS",
    "REQUEST_PERCENTAGE",
    "USER",
    "ClientQuotaEntity",
    "desanitize",
    "sanitize",
]

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"
#: ZooKeeperInternals.DEFAULT_STRING: the znode name of a default entity.
DEFAULT = "<default>"

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
#: KIP-599's quota on topic and partition mutations (partitions created or
#: deleted per second; ControllerMutationQuotaManager).
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
#: KIP-612's quota of an IP entity: connections accepted per second.
CONNECTION_CREATION_RATE = "connection_creation_rate"

#: The quota keys of a user or client-id entity and whether each is integral
#: (Kafka's QuotaConfigs: LONG for the byte rates, DOUBLE for the others).
QUOTA_KEYS: dict[str, bool] = {
    PRODUCER_BYTE_RATE: True,
    CONSUMER_BYTE_RATE: True,
    REQUEST_PERCENTAGE: False,
    CONTROLLER_MUTATION_RATE: False,
}
#: The quota keys of an IP entity (Kafka's QuotaConfig.ipConfigs: an INT, at least 0).
IP_QUOTA_KEYS: dict[str, bool] = {CONNECTION_CREATION_RATE: True}


def sanitize(name: str) -> str:
    """A name as a znode name: Kafka's Sanitizer (URL-encoding; letters,
    digits and ``._-~`` stay)."""
    return urllib.parse.quote(name, safe="")


def desanitize(name: str) -> str:
    return urllib.parse.unquote(name)


@dataclass(frozen=True, slots=True)
class ClientQuotaEntity:
    """``user`` and ``client_id``, or ``ip`` alone: a sanitized name,
    :data:`DEFAULT`, or None when the entity has no such part. At least one
    is set."""

    user: str | None = None
    client_id: str | None = None
    ip: str | None = None

    @classmethod
    def of_ip(cls, ip: str | None) -> ClientQuotaEntity:
        """The entity of an address (None: the default IP entity)."""
        return cls(None, None, DEFAULT if ip is None else sanitize(ip))

    def quota_keys(self) -> dict[str, bool]:
        """The quota keys this kind of entity takes, each with whether it is integral."""
        return IP_QUOTA_KEYS if self.ip is not None else QUOTA_KEYS

    @classmethod
    def of(
        cls, user: str | bool | None = False, client_id: str | bool | None = False
    ) -> ClientQuotaEntity:
        """From names as clients give them: a name, None for the default,
        False for no such part (AlterClientQuotas' entity entries)."""

        def part(name: str | bool | None) -> str | None:
            if name is False:
                return None
            if name is None:
                return DEFAULT
            assert isinstance(name, str)
            return sanitize(name)

        return cls(part(user), part(client_id))

    def path(self) -> tuple[str, str]:
        """The entity's ``/config/<type>/<name>`` as (type, name)."""
        if self.ip is not None:
            return "ips", self.ip
        if self.user is not None and self.client_id is not None:
            return "users", f"{self.user}/clients/{self.client_id}"
        if self.user is not None:
            return "users", self.user
        if self.client_id is not None:
            return "clients", self.client_id
        raise ValueError("an empty client quota entity")

    @classmethod
    def from_path(cls, entity_type: str, name: str) -> ClientQuotaEntity | None:
        """The entity of ``/config/<entity_type>/<name>``; None for another kind of node."""
        if entity_type == "clients" and name and "/" not in name:
            return cls(None, name)
        if entity_type == "ips" and name and "/" not in name:
            return cls(None, None, name)
        if entity_type != "users" or not name:
            return None
        parts = name.split("/")
        if len(parts) == 1:
            return cls(parts[0], None)
        if len(parts) == 3 and parts[1] == "clients" and parts[0] and parts[2]:
            return cls(parts[0], parts[2])
        return None

    def components(self) -> list[tuple[str, str | None]]:
        """(entity type, name as clients see it, None for the default), user first."""
        out: list[tuple[str, str | None]] = []
        if self.ip is not None:
            out.append((IP, None if self.ip == DEFAULT else desanitize(self.ip)))
        if self.user is not None:
            out.append((USER, None if self.user == DEFAULT else desanitize(self.user)))
        if self.client_id is not None:
            out.append(
                (CLIENT_ID, None if self.client_id == DEFAULT else desanitize(self.client_id))
            )
        return out

    def __str__(self) -> str:
        return ", ".join(f"{t} {n if n is not None else '<default>'}" for t, n in self.components())
