"""The group coordinator: classic consumer groups and their committed offsets,
kept in the compacted internal topic ``__consumer_offsets``."""

from pylog.coordinator.group import GroupMetadata, GroupState, MemberMetadata
from pylog.coordinator.group_coordinator import GroupCoordinator
from pylog.coordinator.group_metadata_manager import GROUP_METADATA_TOPIC, GroupMetadataManager

__all__ = [
    "GROUP_METADATA_TOPIC",
    "GroupCoordinator",
    "GroupMetadata",
    "GroupMetadataManager",
    "GroupState",
    "MemberMetadata",
]
