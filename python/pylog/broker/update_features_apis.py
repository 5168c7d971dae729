"""UpdateFeatures (api key 57, KIP-584; Kafka's ``handleUpdateFeatures``):
what ``kafka-features.sh upgrade / downgrade`` sends to change a finalized
feature's level. pylog finalizes one feature, ``transaction.version``
(:mod:`pylog.common.transaction_version`); the level is written where the
cluster keeps it (``/feature`` on ZooKeeper, the document on a lone broker,
:meth:`MetadataStore.update_finalized_features`) and every broker's
ApiVersions answers it from then on (:mod:`pylog.metadata.finalized_feature_cache`).

As Kafka checks it: ALTER on the cluster; on a ZooKeeper cluster the active
controller answers (NOT_CONTROLLER elsewhere: the admin client sends it to
the controller); a feature this broker does not know, a level above what
every registered broker supports, a lower level without a downgrade type
(upgrade type 2 or 3; v0's allow_downgrade) or a higher one with it are
INVALID_UPDATE_VERSION and nothing changes. ``validate_only`` (v1+) checks
and writes nothing. Version 2 answers the top-level error alone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from pylog.broker.auth_helper import AuthHelper
from pylog.common.transaction_version import FEATURE_NAME, MAX_TRANSACTION_VERSION
from pylog.errors import ErrorCode
from pylog.metadata.finalized_feature_cache import FinalizedFeatureCache
from pylog.metadata.store import MetadataStore
from pylog.network import Request
from pylog.protocol.messages import UpdateFeaturesRequest, UpdateFeaturesResponse
from pylog.protocol.messages.update_features_response import UpdatableFeatureResult
from pylog.security.acl_operation import AclOperation

__all__ = ["UpdateFeaturesApis"]

#: Kafka's FeatureUpdate.UpgradeType: 1 upgrade, 2 safe downgrade, 3 unsafe.
_UPGRADE = 1


class UpdateFeaturesApis:
    def __init__(
        self,
        store: MetadataStore,
        auth: AuthHelper,
        is_controller: Callable[[], bool] = lambda: True,
    ) -> None:
        self.store = store
        self.auth = auth
        self.is_controller = is_controller
        self.features = FinalizedFeatureCache(store)

    def _check(self, name: str, level: int, downgrade: bool) -> str | None:
        """Why the update is refused (None: it may be applied)."""
        if name != FEATURE_NAME:
            return f"Feature {name} is not supported by this broker"
        ceiling = int(MAX_TRANSACTION_VERSION)
        support = self.store.feature_support()
        if support is not None:
            ceiling = min(ceiling, support.get(name, 0))
        if level < 0 or level > ceiling:
            return (
                f"Cannot finalize {name} at level {level}: the brokers of the cluster "
                f"support 0 to {ceiling}"
            )
        current = self.features.features()[0][name]
        if level < current and not downgrade:
            return f"Cannot downgrade {name} from {current} to {level} without a downgrade type"
        if level > current and downgrade:
            return f"Cannot upgrade {name} from {current} to {level} with a downgrade type"
        return None

    async def handle_update_features_request(
        self, request: Request, body: UpdateFeaturesRequest
    ) -> UpdateFeaturesResponse:
        version = request.header.api_version
        names = [u.feature for u in body.feature_updates]

        def answer(
            code: int, message: str | None, each: dict[str, tuple[int, str | None]]
        ) -> UpdateFeaturesResponse:
            return UpdateFeaturesResponse(
                throttle_time_ms=0,
                error_code=code,
                error_message=message,
                results=[
                    UpdatableFeatureResult(feature=n, error_code=c, error_message=m)
                    for n, (c, m) in each.items()
                ]
                if version < 2
                else [],
            )

        def everyone(code: int, message: str) -> UpdateFeaturesResponse:
            return answer(code, message, dict.fromkeys(names, (code, message)))

        if not self.auth.authorize_cluster(request, AclOperation.ALTER):
            return everyone(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
        if not self.is_controller():
            return everyone(ErrorCode.NOT_CONTROLLER, "This broker is not the controller.")
        if len(set(names)) != len(names):
            return everyone(ErrorCode.INVALID_REQUEST, "A feature is named twice.")
        levels: dict[str, int] = {}
        for u in body.feature_updates:
            downgrade = u.allow_downgrade if version == 0 else u.upgrade_type != _UPGRADE
            why = self._check(u.feature, u.max_version_level, downgrade)
            if why is not None:
                return answer(
                    ErrorCode.INVALID_UPDATE_VERSION,
                    why,
                    {n: (ErrorCode.INVALID_UPDATE_VERSION if n == u.feature else
                         ErrorCode.NONE, why if n == u.feature else None) for n in names},
                )  # fmt: skip
            levels[u.feature] = u.max_version_level
        if levels and not (version >= 1 and body.validate_only):
            new = {**self.store.finalized_features().features, **levels}
            await asyncio.to_thread(self.store.update_finalized_features, new)
        return answer(ErrorCode.NONE, None, dict.fromkeys(names, (ErrorCode.NONE, None)))
