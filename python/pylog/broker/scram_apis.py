"""DescribeUserScramCredentials and AlterUserScramCredentials: the SCRAM users.

Kafka's KafkaApis with its ZkAdminManager: the credentials live in the
metadata store (``/config/users/<user>`` on a cluster, the embedded store of
a lone broker; :meth:`~pylog.metadata.store.MetadataStore.alter_user_scram_credentials`).
The client sends the salt and the salted password; the broker keeps only
what SCRAM needs to check a login (:class:`~pylog.security.ScramCredential`).

Alter answers one result per user, with Kafka's checks and messages: an empty
user name, an unknown mechanism (UNSUPPORTED_SASL_MECHANISM), iterations
outside 4096..16384 (UNACCEPTABLE_CREDENTIAL), the same user and mechanism
twice in a request (DUPLICATE_RESOURCE), deleting a credential that does not
exist (RESOURCE_NOT_FOUND). On a cluster only the controller alters
(NOT_CONTROLLER elsewhere), as in Kafka's ZooKeeper mode. Describe gives
each user's mechanisms and iteration counts, never a key.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from pylog.errors import ErrorCode, KafkaError
from pylog.logsafe import quoted
from pylog.metadata.store import MetadataStore
from pylog.network import Request
from pylog.protocol.messages import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)
from pylog.protocol.messages.alter_user_scram_credentials_response import (
    AlterUserScramCredentialsResult,
)
from pylog.protocol.messages.describe_user_scram_credentials_response import (
    CredentialInfo,
    DescribeUserScramCredentialsResult,
)
from pylog.security.scram_credential import ScramCredential
from pylog.security.scram_mechanism import MAX_ITERATIONS, MIN_ITERATIONS, ScramMechanism

__all__ = ["ScramApis"]

_log = logging.getLogger("pylog.broker")

_EMPTY_USER = "Username must not be empty"
_UNKNOWN_MECHANISM = "Unknown SCRAM mechanism"


class ScramApis:
    def __init__(
        self, store: MetadataStore, is_controller: Callable[[], bool] = lambda: True
    ) -> None:
        self.store = store
        self.is_controller = is_controller

    # ------------------------------------------------------------------ describe

    def _describe(self, user: str, explicit: bool) -> DescribeUserScramCredentialsResult | None:
        creds = self.store.scram_credentials.credentials(user)
        if not creds:
            if not explicit:
                return None
            return DescribeUserScramCredentialsResult(
                user=user,
                error_code=ErrorCode.RESOURCE_NOT_FOUND,
                error_message=f"Attempt to describe a user credential that does not exist: {user}",
            )
        infos = [
            CredentialInfo(mechanism=m.type_id, iterations=creds[m].iterations)
            for m in ScramMechanism
            if m in creds
        ]
        return DescribeUserScramCredentialsResult(
            user=user, error_code=0, error_message=None, credential_infos=infos
        )

    async def handle_describe_user_scram_credentials_request(
        self, request: Request, body: DescribeUserScramCredentialsRequest
    ) -> DescribeUserScramCredentialsResponse:
        results: list[DescribeUserScramCredentialsResult] = []
        if not body.users:
            for user in self.store.scram_credentials.users():
                got = self._describe(user, explicit=False)
                if got is not None:
                    results.append(got)
        else:
            names = [u.name for u in body.users]
            seen: set[str] = set()
            for name in names:
                if name in seen:
                    continue
                seen.add(name)
                if not name:
                    results.append(
                        DescribeUserScramCredentialsResult(
                            user=name,
                            error_code=ErrorCode.RESOURCE_NOT_FOUND,
                            error_message=_EMPTY_USER,
                        )
                    )
                elif names.count(name) > 1:
                    results.append(
                        DescribeUserScramCredentialsResult(
                            user=name,
                            error_code=ErrorCode.DUPLICATE_RESOURCE,
                            error_message="Cannot describe SCRAM credentials for the same "
                            f"user twice in a single request: {name}",
                        )
                    )
                else:
                    got = self._describe(name, explicit=True)
                    assert got is not None
                    results.append(got)
        return DescribeUserScramCredentialsResponse(
            # Kafka leaves it unset on success, which its codec writes as ""
            throttle_time_ms=0,
            error_code=0,
            error_message="",
            results=results,
        )

    # ------------------------------------------------------------------ alter

    async def handle_alter_user_scram_credentials_request(
        self, request: Request, body: AlterUserScramCredentialsRequest
    ) -> AlterUserScramCredentialsResponse:
        users = [u.name for u in body.upsertions] + [d.name for d in body.deletions]
        if not self.is_controller():
            return _all_failed(users, ErrorCode.NOT_CONTROLLER, None)
        errors: dict[str, tuple[int, str]] = {}
        for u in body.upsertions:
            if not u.name:
                errors.setdefault(u.name, (ErrorCode.UNACCEPTABLE_CREDENTIAL, _EMPTY_USER))
            elif ScramMechanism.by_type(u.mechanism) is None:
                errors.setdefault(
                    u.name, (ErrorCode.UNSUPPORTED_SASL_MECHANISM, _UNKNOWN_MECHANISM)
                )
            elif not MIN_ITERATIONS <= u.iterations <= MAX_ITERATIONS:
                why = (
                    "Too many iterations" if u.iterations > MAX_ITERATIONS else "Too few iterations"
                )
                errors.setdefault(u.name, (ErrorCode.UNACCEPTABLE_CREDENTIAL, why))
        for d in body.deletions:
            if not d.name:
                errors.setdefault(d.name, (ErrorCode.UNACCEPTABLE_CREDENTIAL, _EMPTY_USER))
            elif ScramMechanism.by_type(d.mechanism) is None:
                errors.setdefault(
                    d.name, (ErrorCode.UNSUPPORTED_SASL_MECHANISM, _UNKNOWN_MECHANISM)
                )
        pairs = [(u.name, u.mechanism) for u in body.upsertions if u.name not in errors] + [
            (d.name, d.mechanism) for d in body.deletions if d.name not in errors
        ]
        for pair in pairs:
            if pairs.count(pair) > 1:
                errors.setdefault(
                    pair[0],
                    (
                        ErrorCode.DUPLICATE_RESOURCE,
                        "A user credential cannot be altered twice in the same request",
                    ),
                )
        cache = self.store.scram_credentials
        for d in body.deletions:
            mechanism = ScramMechanism.by_type(d.mechanism)
            if (
                d.name not in errors
                and mechanism is not None
                and cache.get(d.name, mechanism) is None
            ):
                errors[d.name] = (
                    ErrorCode.RESOURCE_NOT_FOUND,
                    "Attempt to delete a user credential that does not exist",
                )
        changes: dict[str, dict[ScramMechanism, ScramCredential | None]] = {}
        for d in body.deletions:
            mechanism = ScramMechanism.by_type(d.mechanism)
            if d.name not in errors and mechanism is not None:
                changes.setdefault(d.name, {})[mechanism] = None
        for u in body.upsertions:
            mechanism = ScramMechanism.by_type(u.mechanism)
            if u.name not in errors and mechanism is not None:
                changes.setdefault(u.name, {})[mechanism] = ScramCredential.from_salted_password(
                    mechanism, bytes(u.salt), bytes(u.salted_password), u.iterations
                )
        results = [
            AlterUserScramCredentialsResult(user=user, error_code=code, error_message=message)
            for user, (code, message) in errors.items()
        ]
        for user, change in changes.items():
            try:
                await asyncio.to_thread(self.store.alter_user_scram_credentials, {user: change})
            except KafkaError as e:
                _log.warning("storing the SCRAM credentials of %s failed: %s", quoted(user), e)
                results.append(
                    AlterUserScramCredentialsResult(
                        user=user, error_code=e.code, error_message=str(e)
                    )
                )
                continue
            _log.info(
                "SCRAM credentials of %s: %s",
                quoted(user),
                ", ".join(
                    f"{m.mechanism_name} {'deleted' if c is None else 'set'}"
                    for m, c in change.items()
                ),
            )
            results.append(
                AlterUserScramCredentialsResult(user=user, error_code=0, error_message=None)
            )
        return AlterUserScramCredentialsResponse(throttle_time_ms=0, results=results)


def _all_failed(
    users: list[str], code: int, message: str | None
) -> AlterUserScramCredentialsResponse:
    return AlterUserScramCredentialsResponse(
        throttle_time_ms=0,
        results=[
            AlterUserScramCredentialsResult(user=u, error_code=code, error_message=message)
            for u in dict.fromkeys(users)
        ],
    )
