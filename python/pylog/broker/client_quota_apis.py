"""DescribeClientQuotas and AlterClientQuotas: the quotas of users and client
ids (entity types ``user`` and ``client-id``) and of IP addresses (``ip``,
KIP-612's ``connection_creation_rate``), kept in the metadata store
(``/config/users``, ``/config/clients`` and ``/config/ips`` in ZooKeeper),
validated as Kafka's ZooKeeper-mode brokers validate them (``ZkAdminManager``):
any broker answers both, each entity of an AlterClientQuotas gets its own error.

A negative integral value is refused as Kafka refuses it: its check rounds
toward zero (``(value + 1e-6).toInt``), so ``-5`` is "not a INT value".
"""

from __future__ import annotations

import asyncio
import ipaddress
import math
import socket
from collections.abc import Mapping

from pylog.errors import ErrorCode, KafkaError
from pylog.metadata.client_quota_entity import (
    CLIENT_ID,
    DEFAULT,
    IP,
    USER,
    ClientQuotaEntity,
    desanitize,
    sanitize,
)
from pylog.metadata.store import MetadataStore
from pylog.network import Request
from pylog.protocol.messages import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)
from pylog.protocol.messages import alter_client_quotas_response as alter_out
from pylog.protocol.messages import describe_client_quotas_response as describe_out

__all__ = ["ClientQuotaApis"]

# DescribeClientQuotas' match types
_MATCH_EXACT, _MATCH_DEFAULT, _MATCH_SPECIFIED = 0, 1, 2
_IP = IP
_EPSILON = 1e-6


class _Invalid(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def _entity_of(parts: list[tuple[str, str | None]]) -> ClientQuotaEntity:
    """AlterClientQuotas' entity → ClientQuotaEntity, or _Invalid as Kafka refuses it."""
    if not parts:
        raise _Invalid(ErrorCode.INVALID_REQUEST, "Invalid empty client quota entity")
    user: str | None = None
    client_id: str | None = None
    ip: str | None = None
    seen: set[str] = set()
    for entity_type, name in parts:
        if entity_type in seen:
            raise _Invalid(ErrorCode.INVALID_REQUEST, f"Duplicate {entity_type} entity type")
        seen.add(entity_type)
        if entity_type not in (USER, CLIENT_ID, _IP):
            raise _Invalid(
                ErrorCode.INVALID_REQUEST, f"Unhandled client quota entity type: {entity_type}"
            )
        if name == "":
            raise _Invalid(ErrorCode.INVALID_REQUEST, f"Empty {entity_type} not supported")
        znode = DEFAULT if name is None else sanitize(name)
        if entity_type == USER:
            user = znode
        elif entity_type == CLIENT_ID:
            client_id = znode
        else:
            ip = znode
    if ip is not None:
        if len(seen) > 1:
            raise _Invalid(
                ErrorCode.INVALID_REQUEST,
                "Invalid quota entity combination, IP entity should not be used with "
                "user/client ID entity.",
            )
        return ClientQuotaEntity(None, None, ip)
    return ClientQuotaEntity(user, client_id)


def _is_valid_ip_entity(entity: ClientQuotaEntity) -> bool:
    """Kafka's DynamicConfig.Ip.isValidIpEntity: the default, an IP, or a
    host name that resolves (InetAddress.getByName). May block on DNS."""
    if entity.ip is None or entity.ip == DEFAULT:
        return True
    name = desanitize(entity.ip)
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        pass
    try:
        socket.getaddrinfo(name, None)
    except (OSError, UnicodeError):
        return False
    return True


def _value_of(entity: ClientQuotaEntity, key: str, value: float) -> float:
    integral = entity.quota_keys().get(key)
    if integral is None:
        raise _Invalid(ErrorCode.INVALID_REQUEST, f"Invalid configuration key {key}")
    if not math.isfinite(value):
        raise _Invalid(ErrorCode.INVALID_REQUEST, f"Configuration {key} must be a finite number")
    if entity.ip is not None:
        # Kafka's QuotaConfig.ipConfigs: an INT (at least 0: a negative one
        # already fails here, int() rounding toward zero as Scala's toInt).
        as_int = int(value + _EPSILON) if -(2**31) <= value < 2**31 else None
        if as_int is None or abs(as_int - value) > _EPSILON:
            raise _Invalid(ErrorCode.INVALID_REQUEST, f"Configuration {key} must be a INT value")
        return float(as_int)
    if integral:
        if not -(2**63) <= value < 2**63:  # Kafka's LONG
            raise _Invalid(ErrorCode.INVALID_REQUEST, f"Configuration {key} must be a LONG value")
        as_int = int(value + _EPSILON)
        if abs(as_int - value) > _EPSILON:
            raise _Invalid(ErrorCode.INVALID_REQUEST, f"Configuration {key} must be a LONG value")
        return float(as_int)
    return float(value)


class ClientQuotaApis:
    def __init__(self, metadata_store: MetadataStore) -> None:
        self.metadata_store = metadata_store

    # ------------------------------------------------------------------ Describe

    async def handle_describe_client_quotas_request(
        self, request: Request, body: DescribeClientQuotasRequest
    ) -> DescribeClientQuotasResponse:
        try:
            filters = self._filters(body)
        except _Invalid as e:
            return DescribeClientQuotasResponse(
                throttle_time_ms=0, error_code=e.code, error_message=str(e), entries=None
            )
        entries = []
        for entity, values in sorted(
            self.metadata_store.client_quotas.items(),
            key=lambda kv: (kv[0].ip or "", kv[0].user or "", kv[0].client_id or ""),
        ):
            if not _matches(entity, filters, body.strict):
                continue
            entries.append(
                describe_out.EntryData(
                    entity=[
                        describe_out.EntityData(entity_type=t, entity_name=n)
                        for t, n in entity.components()
                    ],
                    values=[
                        describe_out.ValueData(key=k, value=v) for k, v in sorted(values.items())
                    ],
                )
            )
        return DescribeClientQuotasResponse(
            throttle_time_ms=0, error_code=ErrorCode.NONE, error_message="", entries=entries
        )

    @staticmethod
    def _filters(body: DescribeClientQuotasRequest) -> dict[str, tuple[int, str | None]]:
        """entity type → (match type, the znode name an EXACT match wants)."""
        out: dict[str, tuple[int, str | None]] = {}
        for c in body.components:
            if c.entity_type == "":
                raise _Invalid(
                    ErrorCode.INVALID_REQUEST, "Unexpected empty filter component entity type"
                )
            if c.entity_type not in (USER, CLIENT_ID, _IP):
                raise _Invalid(
                    ErrorCode.UNSUPPORTED_VERSION,
                    f"Custom entity type '{c.entity_type}' not supported",
                )
            if c.entity_type in out:
                raise _Invalid(
                    ErrorCode.INVALID_REQUEST,
                    f"Duplicate {c.entity_type} filter component entity type",
                )
            if c.match_type == _MATCH_EXACT:
                if c.match is None:
                    raise _Invalid(ErrorCode.INVALID_REQUEST, "Exact match requires a name")
                out[c.entity_type] = (_MATCH_EXACT, sanitize(c.match))
            elif c.match_type in (_MATCH_DEFAULT, _MATCH_SPECIFIED):
                out[c.entity_type] = (c.match_type, None)
            else:
                raise _Invalid(ErrorCode.INVALID_REQUEST, f"Unknown match type {c.match_type}")
        if _IP in out and len(out) > 1:
            raise _Invalid(
                ErrorCode.INVALID_REQUEST,
                "Invalid entity filter component combination, IP filter component should not "
                "be used with user or clientId filter component.",
            )
        return out

    # ------------------------------------------------------------------ Alter

    async def handle_alter_client_quotas_request(
        self, request: Request, body: AlterClientQuotasRequest
    ) -> AlterClientQuotasResponse:
        results: list[tuple[list[tuple[str, str | None]], int, str | None]] = []
        changes: dict[ClientQuotaEntity, dict[str, float | None]] = {}
        pending: list[int] = []  # indexes of results waiting for the store
        for entry in body.entries:
            parts = [(e.entity_type, e.entity_name) for e in entry.entity]
            try:
                entity = _entity_of(parts)
                if entity.ip is not None and not await asyncio.to_thread(
                    _is_valid_ip_entity, entity
                ):
                    raise _Invalid(
                        ErrorCode.INVALID_REQUEST,
                        f"{desanitize(entity.ip)} is not a valid IP or resolvable host.",
                    )
                ops: dict[str, float | None] = {}
                for op in entry.ops:
                    ops[op.key] = None if op.remove else _value_of(entity, op.key, op.value)
            except _Invalid as e:
                results.append((parts, e.code, str(e)))
                continue
            results.append((parts, ErrorCode.NONE, None))
            if not body.validate_only and ops:
                changes.setdefault(entity, {}).update(ops)
                pending.append(len(results) - 1)
        if changes:
            try:
                await asyncio.to_thread(self.metadata_store.alter_client_quotas, changes)
            except KafkaError as e:
                for i in pending:
                    results[i] = (results[i][0], e.code, str(e))
        return AlterClientQuotasResponse(
            throttle_time_ms=0,
            entries=[
                alter_out.EntryData(
                    error_code=code,
                    error_message=message,
                    entity=[alter_out.EntityData(entity_type=t, entity_name=n) for t, n in parts],
                )
                for parts, code, message in results
            ],
        )


def _matches(
    entity: ClientQuotaEntity, filters: Mapping[str, tuple[int, str | None]], strict: bool
) -> bool:
    """Kafka's describe filter: a component's entity type must be present and
    match; with ``strict`` the entity may have no other type. IP entities
    answer only filters of no user or client-id component (Kafka's)."""
    if entity.ip is not None:
        if USER in filters or CLIENT_ID in filters:
            return False
        wanted_ip = filters.get(_IP)
        if wanted_ip is None:
            return not strict
        match_type, name = wanted_ip
        if match_type == _MATCH_EXACT:
            return entity.ip == name
        if match_type == _MATCH_DEFAULT:
            return entity.ip == DEFAULT
        return True
    if _IP in filters:
        return False  # a user or client-id entity
    for entity_type, znode in ((USER, entity.user), (CLIENT_ID, entity.client_id)):
        wanted = filters.get(entity_type)
        if wanted is None:
            if strict and znode is not None:
                return False
            continue
        if znode is None:
            return False
        match_type, name = wanted
        if match_type == _MATCH_EXACT and znode != name:
            return False
        if match_type == _MATCH_DEFAULT and znode != DEFAULT:
            return False
        # _MATCH_SPECIFIED: any entity of the type — the default too, as
        # Kafka's ZooKeeper-mode brokers answer
    return True
