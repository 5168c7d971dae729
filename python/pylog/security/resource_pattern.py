"""ResourcePattern and ResourcePatternFilter (Kafka's names): which resources
an ACL applies to, and which patterns a Describe/DeleteAcls filter selects.

A pattern is a resource type, a name and a pattern type: LITERAL ``foo``
(the resource ``foo``), LITERAL ``*`` (every resource of the type), PREFIXED
``foo`` (every name starting ``foo``). The cluster's one resource is named
``kafka-cluster``.
"""

from __future__ import annotations

from dataclasses import dataclass

from pylog.security.pattern_type import PatternType
from pylog.security.resource_type import ResourceType

__all__ = ["CLUSTER_NAME", "WILDCARD_RESOURCE", "ResourcePattern", "ResourcePatternFilter"]

#: The name of the CLUSTER resource (Kafka's CLUSTER_NAME).
CLUSTER_NAME = "kafka-cluster"
#: A LITERAL pattern of this name applies to every resource of its type.
WILDCARD_RESOURCE = "*"


@dataclass(frozen=True, slots=True, order=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType

    def __str__(self) -> str:
        return (
            f"ResourcePattern(resourceType={self.resource_type.name}, name={self.name}, "
            f"patternType={self.pattern_type.name})"
        )


@dataclass(frozen=True, slots=True)
class ResourcePatternFilter:
    """``name`` None matches any name; ANY types match any type."""

    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType

    @property
    def is_unknown(self) -> bool:
        return ResourceType.UNKNOWN in (self.resource_type,) or (
            self.pattern_type == PatternType.UNKNOWN
        )

    def matches(self, pattern: ResourcePattern) -> bool:
        if self.resource_type not in (ResourceType.ANY, pattern.resource_type):
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH, pattern.pattern_type):
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, pattern.pattern_type):
            return self.name == pattern.name
        # MATCH: every pattern that would apply to a resource named self.name
        if pattern.pattern_type == PatternType.LITERAL:
            return pattern.name in (self.name, WILDCARD_RESOURCE)
        return self.name.startswith(pattern.name)

    def exact_patterns(self) -> list[ResourcePattern]:
        """The stored patterns this filter names outright (a specific type and
        a name with LITERAL, PREFIXED or ANY): looked up directly, not only in
        the cache (Kafka's filterToResources)."""
        if self.name is None or not self.resource_type.is_specific:
            return []
        if self.pattern_type.is_specific:
            return [ResourcePattern(self.resource_type, self.name, self.pattern_type)]
        if self.pattern_type == PatternType.ANY:
            return [
                ResourcePattern(self.resource_type, self.name, PatternType.LITERAL),
                ResourcePattern(self.resource_type, self.name, PatternType.PREFIXED),
            ]
        return []
