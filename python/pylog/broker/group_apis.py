"""The group handlers: FindCoordinator, JoinGroup, SyncGroup, Heartbeat,
LeaveGroup, OffsetCommit, OffsetFetch, OffsetDelete, ListGroups, DescribeGroups
and DeleteGroups. Each decodes what its version carries, asks the
GroupCoordinator, and answers in that version's shape; KafkaApis routes them
(and ApiVersions advertises them, GROUP_API_VERSIONS) when it has a
coordinator.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from typing import Any

from pylog.coordinator.group import GroupState
from pylog.coordinator.group_coordinator import GroupCoordinator, JoinRequest
from pylog.coordinator.group_metadata_manager import GROUP_METADATA_TOPIC
from pylog.errors import ErrorCode
from pylog.network import Request

__all__ = ["GroupApis"]

_KEY_TYPE_GROUP = 0
_AUTHORIZED_OPS_NOT_REQUESTED = -(2**31)
# READ, DESCRIBE, DELETE on a group: what an authorizer-less broker allows.
_GROUP_OPS = sum(1 << op for op in (3, 6, 8))


class GroupApis:
    """The group APIs over one GroupCoordinator. ``broker_endpoint`` maps a
    listener name to this broker's (host, port) on it, FindCoordinator's answer."""

    def __init__(
        self,
        coordinator: GroupCoordinator,
        broker_id: int,
        broker_endpoint: Callable[[str], tuple[str, int]],
    ) -> None:
        self.coordinator = coordinator
        self.broker_id = broker_id
        self.broker_endpoint = broker_endpoint

    # ------------------------------------------------------------ FindCoordinator

    def _coordinator_for(self, request: Request, key: str, key_type: int) -> dict[str, Any]:
        host, port = self.broker_endpoint(request.listener)
        node = self.broker_id
        if key_type != _KEY_TYPE_GROUP:
            # No transaction coordinator runs here (yet).
            code: int = ErrorCode.COORDINATOR_NOT_AVAILABLE
        else:
            code = self.coordinator.find_coordinator(key)
        if code:
            node, host, port = -1, "", -1
        return {
            "key": key,
            "node_id": node,
            "host": host,
            "port": port,
            "error_code": code,
            "error_message": None if code == 0 else ErrorCode(code).name,
        }

    async def handle_find_coordinator_request(
        self, request: Request, body: Any
    ) -> Mapping[str, Any]:
        version = request.header.api_version
        key_type = body.get("key_type", 0)
        manager = self.coordinator.manager
        if (
            key_type == _KEY_TYPE_GROUP
            and manager.metadata_store.topic(GROUP_METADATA_TOPIC) is None
        ):
            # The first FindCoordinator creates the offsets topic: its logs
            # are made on a worker thread, and a store busy creating another
            # request's topics is waited for there, not on the event loop.
            # A failure here is met again, and answered, by find_coordinator.
            with contextlib.suppress(Exception):
                await asyncio.to_thread(manager.ensure_topic)
        if version >= 4:
            return {
                "throttle_time_ms": 0,
                "coordinators": [
                    self._coordinator_for(request, k, key_type) for k in body.coordinator_keys
                ],
            }
        out = self._coordinator_for(request, body.key, key_type)
        out.pop("key")
        out["throttle_time_ms"] = 0
        return out

    # ------------------------------------------------------------ membership

    async def handle_join_group_request(self, request: Request, body: Any) -> Mapping[str, Any]:
        version = request.header.api_version
        session = body.session_timeout_ms
        rebalance = body.get("rebalance_timeout_ms", -1)
        req = JoinRequest(
            group_id=body.group_id,
            member_id=body.member_id,
            group_instance_id=body.get("group_instance_id"),
            client_id=request.header.client_id or "",
            client_host="/" + request.client_host,
            rebalance_timeout_ms=rebalance if version >= 1 and rebalance > 0 else session,
            session_timeout_ms=session,
            protocol_type=body.protocol_type,
            protocols=[(p.name, bytes(p.metadata)) for p in body.protocols],
            require_known_member_id=version >= 4,
        )
        # No mark_local_complete here or in SyncGroup: as on Kafka, the
        # connection's next request (a heartbeat, say) is handled only after
        # this answer, so it sees the group as the answer left it, not a
        # rebalance that is already over.
        out = dict(await self.coordinator.join_group(req))
        # Fields a version lacks must be left out (the codec refuses them).
        if version < 9:
            out.pop("skip_assignment", None)
        if version < 7:
            out.pop("protocol_type", None)
            if out.get("protocol_name") is None:
                out["protocol_name"] = ""
        if version < 5:
            for m in out["members"]:
                m.pop("group_instance_id", None)
        out["throttle_time_ms"] = 0
        return out

    async def handle_sync_group_request(self, request: Request, body: Any) -> Mapping[str, Any]:
        out = await self.coordinator.sync_group(
            body.group_id,
            body.generation_id,
            body.member_id,
            body.get("group_instance_id"),
            body.get("protocol_type"),
            body.get("protocol_name"),
            {a.member_id: bytes(a.assignment) for a in body.assignments},
        )
        out = {**out, "throttle_time_ms": 0}
        if request.header.api_version < 5:
            out.pop("protocol_type", None)
            out.pop("protocol_name", None)
        return out

    async def handle_heartbeat_request(self, request: Request, body: Any) -> Mapping[str, Any]:
        code = self.coordinator.heartbeat(
            body.group_id, body.member_id, body.get("group_instance_id"), body.generation_id
        )
        return {"throttle_time_ms": 0, "error_code": code}

    async def handle_leave_group_request(self, request: Request, body: Any) -> Mapping[str, Any]:
        version = request.header.api_version
        if version >= 3:
            members = [(m.member_id, m.get("group_instance_id")) for m in body.members]
        else:
            members = [(body.member_id, None)]
        code, codes = self.coordinator.leave_group(body.group_id, members)
        if version < 3:
            if code == ErrorCode.NONE and codes:
                code = codes[0]
            return {"throttle_time_ms": 0, "error_code": code}
        return {
            "throttle_time_ms": 0,
            "error_code": code,
            "members": [
                {"member_id": m, "group_instance_id": i, "error_code": c}
                for (m, i), c in zip(members, codes, strict=False)
            ],
        }

    # ------------------------------------------------------------ offsets

    async def handle_offset_commit_request(self, request: Request, body: Any) -> Mapping[str, Any]:
        offsets: dict[tuple[str, int], tuple[int, int, str | None]] = {}
        for t in body.topics:
            for p in t.partitions:
                offsets[(t.name, p.partition_index)] = (
                    p.committed_offset,
                    p.get("committed_leader_epoch", -1),
                    p.committed_metadata,
                )
        request.mark_local_complete()
        codes = await self.coordinator.commit_offsets(
            body.group_id,
            body.get("member_id", ""),
            body.get("group_instance_id"),
            body.get("generation_id_or_member_epoch", -1),
            offsets,
            body.get("retention_time_ms", -1),
        )
        return {
            "throttle_time_ms": 0,
            "topics": [
                {
                    "name": t.name,
                    "partitions": [
                        {
                            "partition_index": p.partition_index,
                            "error_code": codes[(t.name, p.partition_index)],
                        }
                        for p in t.partitions
                    ],
                }
                for t in body.topics
            ],
        }

    def _fetch_group(self, group_id: str, topics: Any) -> tuple[int, list[dict[str, Any]]]:
        wanted: list[tuple[str, int]] | None = None
        if topics is not None:
            wanted = [(t.name, p) for t in topics for p in t.partition_indexes]
        code, found = self.coordinator.fetch_offsets(group_id, wanted)
        if code and wanted is not None:
            found = dict.fromkeys(wanted)
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (topic, partition), o in found.items():
            by_topic.setdefault(topic, []).append(
                {
                    "partition_index": partition,
                    "committed_offset": o.offset if o is not None else -1,
                    "committed_leader_epoch": o.leader_epoch if o is not None else -1,
                    "metadata": o.metadata if o is not None else "",
                    "error_code": 0,
                }
            )
        return code, [{"name": t, "partitions": ps} for t, ps in by_topic.items()]

    async def handle_offset_fetch_request(self, request: Request, body: Any) -> Mapping[str, Any]:
        version = request.header.api_version
        if version >= 8:
            groups = []
            for g in body.groups:
                code, topics = self._fetch_group(g.group_id, g.topics)
                groups.append({"group_id": g.group_id, "topics": topics, "error_code": code})
            return {"throttle_time_ms": 0, "groups": groups}
        code, topics = self._fetch_group(body.group_id, body.topics)
        if version < 2 and code:
            # No top-level error before v2: every partition carries it.
            for t in topics:
                for p in t["partitions"]:
                    p["error_code"] = code
        return {"throttle_time_ms": 0, "topics": topics, "error_code": code}

    async def handle_offset_delete_request(self, request: Request, body: Any) -> Mapping[str, Any]:
        wanted = [(t.name, p.partition_index) for t in body.topics for p in t.partitions]
        request.mark_local_complete()
        code, codes = await self.coordinator.delete_offsets(body.group_id, wanted)
        topics = []
        if code == ErrorCode.NONE:
            for t in body.topics:
                topics.append(
                    {
                        "name": t.name,
                        "partitions": [
                            {
                                "partition_index": p.partition_index,
                                "error_code": codes[(t.name, p.partition_index)],
                            }
                            for p in t.partitions
                        ],
                    }
                )
        return {"error_code": code, "throttle_time_ms": 0, "topics": topics}

    # ------------------------------------------------------------ admin

    async def handle_list_groups_request(self, request: Request, body: Any) -> Mapping[str, Any]:
        states = {s.lower() for s in body.get("states_filter") or []}
        types = {t.lower() for t in body.get("types_filter") or []}
        code, groups = self.coordinator.list_groups(states or None, types or None)
        return {
            "throttle_time_ms": 0,
            "error_code": code,
            "groups": [
                {
                    "group_id": g.group_id,
                    "protocol_type": g.protocol_type or "",
                    "group_state": g.state.value,
                    "group_type": "Classic",
                }
                for g in groups
            ],
        }

    async def handle_describe_groups_request(
        self, request: Request, body: Any
    ) -> Mapping[str, Any]:
        with_ops = bool(body.get("include_authorized_operations"))
        version = request.header.api_version
        out = []
        for gid in body.groups:
            code, group = self.coordinator.describe_group(gid)
            entry: dict[str, Any] = {
                "error_code": code,
                "group_id": gid,
                "group_state": GroupState.DEAD.value,
                "protocol_type": "",
                "protocol_data": "",
                "members": [],
                "authorized_operations": _GROUP_OPS if with_ops else _AUTHORIZED_OPS_NOT_REQUESTED,
            }
            if group is not None:
                stable = group.is_in(GroupState.STABLE)
                entry["group_state"] = group.state.value
                entry["protocol_type"] = group.protocol_type or ""
                entry["protocol_data"] = (group.protocol_name or "") if stable else ""
                members = []
                for m in group.members.values():
                    meta = b""
                    if stable and group.protocol_name is not None:
                        try:
                            meta = m.metadata(group.protocol_name)
                        except KeyError:
                            meta = b""
                    members.append(
                        {
                            "member_id": m.member_id,
                            "group_instance_id": m.group_instance_id if version >= 4 else None,
                            "client_id": m.client_id,
                            "client_host": m.client_host,
                            "member_metadata": meta,
                            "member_assignment": m.assignment if stable else b"",
                        }
                    )
                entry["members"] = members
            out.append(entry)
        return {"throttle_time_ms": 0, "groups": out}

    async def handle_delete_groups_request(self, request: Request, body: Any) -> Mapping[str, Any]:
        request.mark_local_complete()
        codes = await self.coordinator.delete_groups(list(body.groups_names))
        return {
            "throttle_time_ms": 0,
            "results": [{"group_id": g, "error_code": codes[g]} for g in body.groups_names],
        }
