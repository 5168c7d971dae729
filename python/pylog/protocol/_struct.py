"""``Struct``: the base of the generated message classes, what the decoders return.

One class per struct of a message (``ProduceRequest``, ``TopicProduceData``, ...,
in ``messages/``), with a slot and a typed attribute for every field the struct
has in any version; a field that the decoded version lacks holds its default.
Fields are attributes (``req.topic_data``), and a ``Struct`` also reads like a
mapping (``req["acks"]``, ``req.get("acks")``, ``keys()``), so a decoded message
can be handed back to an encoder unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, ClassVar


class Struct:
    """Base of the generated message classes."""

    __slots__ = ()
    _fields: ClassVar[tuple[str, ...]] = ()

    if not TYPE_CHECKING:
        # Hidden from type checkers: with a visible ``__getattr__`` every unknown
        # attribute would type as Any, and a misspelt field name would pass.
        def __getattr__(self, name: str) -> Any:  # only reached for names that are not fields
            raise AttributeError(f"{type(self).__qualname__} has no field {name!r}")

    def __getitem__(self, name: str) -> Any:
        if name in self._fields:
            return getattr(self, name)
        raise KeyError(name)

    def get(self, name: str, default: Any = None) -> Any:
        if name in self._fields:
            return getattr(self, name)
        return default

    def __contains__(self, name: object) -> bool:
        return name in self._fields

    def keys(self) -> tuple[str, ...]:
        return self._fields

    def __iter__(self) -> Iterator[str]:
        return iter(self._fields)

    def __len__(self) -> int:
        return len(self._fields)

    def items(self) -> Iterator[tuple[str, Any]]:
        for name in self._fields:
            yield name, getattr(self, name)

    def to_dict(self) -> dict[str, Any]:
        """The struct as plain dicts and lists (records stay memoryviews)."""
        return {name: _plain(getattr(self, name)) for name in self._fields}

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in self._fields)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}={_short(getattr(self, n))}" for n in self._fields)
        return f"{type(self).__qualname__}({inner})"


def _plain(value: Any) -> Any:
    if isinstance(value, Struct):
        return value.to_dict()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _short(value: Any) -> str:
    if isinstance(value, memoryview):
        return f"<{value.nbytes} bytes>"
    return repr(value)
