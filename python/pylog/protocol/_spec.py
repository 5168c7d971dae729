"""The message definitions (``schema/*.json``) as a small Python model.

Kafka describes every request, response and header in a JSON file with ``//``
comments. This module reads those files and resolves them into ``MessageSpec``
and ``FieldSpec`` objects that the code generator (``_codegen``) turns into
typed classes and specialised decode/encode functions per (message,
version): the modules of ``messages/``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: the message definitions (Kafka's JSON files)
SCHEMA_DIR = Path(__file__).resolve().parent / "schema"

#: upper bound standing for "and every later version" in ``"3+"``
OPEN_END = 0x7FFF


@dataclass(frozen=True, slots=True)
class Versions:
    """A version range as the JSON writes it: ``"0+"``, ``"3-5"``, ``"7"`` or ``"none"``."""

    low: int
    high: int  # inclusive; low > high means the empty range ("none")

    @classmethod
    def parse(cls, text: str | None) -> Versions:
        if text is None or text == "none":
            return NONE
        text = text.strip()
        if text.endswith("+"):
            return cls(int(text[:-1]), OPEN_END)
        if "-" in text:
            lo, hi = text.split("-", 1)
            return cls(int(lo), int(hi))
        return cls(int(text), int(text))

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.low <= version <= self.high

    def __bool__(self) -> bool:
        return self.low <= self.high


NONE = Versions(1, 0)

_PRIMITIVE_SIZES = {
    "bool": 1,
    "int8": 1,
    "int16": 2,
    "uint16": 2,
    "int32": 4,
    "uint32": 4,
    "int64": 8,
    "float64": 8,
    "uuid": 16,
}
PRIMITIVES = frozenset({*_PRIMITIVE_SIZES, "string", "bytes", "records"})
FIXED_SIZES = _PRIMITIVE_SIZES


def snake_case(name: str) -> str:
    """``TopicData`` -> ``topic_data``, ``timeoutMs`` -> ``timeout_ms``."""
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


@dataclass(slots=True)
class FieldSpec:
    name: str  # snake_case
    json_name: str
    type: str  # element type for arrays ("int32", "string", or a struct name)
    is_array: bool
    versions: Versions
    nullable: Versions
    tagged: Versions
    tag: int | None
    flexible: Versions | None  # a field-level override of the message's flexible versions
    ignorable: bool
    default: Any  # scalar: its Python default; array: () for empty or None; struct: None
    fields: list[FieldSpec] | None  # the struct's fields when type is a struct

    @property
    def is_struct(self) -> bool:
        return self.fields is not None


@dataclass(slots=True)
class MessageSpec:
    name: str  # e.g. "ProduceRequest"
    kind: str  # "request" | "response" | "header"
    api_key: int | None
    valid: Versions
    flexible: Versions
    fields: list[FieldSpec]


def strip_comments(text: str) -> str:
    """Remove ``//`` comments outside JSON strings."""
    out: list[str] = []
    i, n = 0, len(text)
    in_str = False
    while i < n:
        c = text[i]
        if in_str:
            out.append(c)
            if c == "\\":
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                in_str = False
            i += 1
        elif c == '"':
            in_str = True
            out.append(c)
            i += 1
        elif c == "/" and text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _default(type_: str, nullable: Versions, raw: Any) -> Any:
    if raw is not None and isinstance(raw, str) and raw == "null":
        return None
    if type_ in ("int8", "int16", "uint16", "int32", "uint32", "int64"):
        return 0 if raw is None else int(str(raw), 0)
    if type_ == "float64":
        return 0.0 if raw is None else float(raw)
    if type_ == "bool":
        if raw is None:
            return False
        return raw is True or str(raw).lower() == "true"
    if type_ == "string":
        return "" if raw is None else str(raw)
    if type_ == "uuid":
        return ZERO_UUID
    if type_ in ("bytes", "records"):
        return None if nullable else b""
    raise ValueError(f"no default for type {type_}")


#: Kafka's all-zero topic id in its base64url text form (``Uuid.ZERO_UUID``)
ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"


def _build_fields(
    raw_fields: list[dict[str, Any]],
    common: dict[str, list[dict[str, Any]]],
) -> list[FieldSpec]:
    result: list[FieldSpec] = []
    for raw in raw_fields:
        type_text: str = raw["type"]
        is_array = type_text.startswith("[]")
        elem = type_text[2:] if is_array else type_text
        nullable = Versions.parse(raw.get("nullableVersions"))
        sub: list[FieldSpec] | None = None
        if elem not in PRIMITIVES:
            raw_sub = raw.get("fields")
            if raw_sub is None:
                raw_sub = common[elem]
            sub = _build_fields(raw_sub, common)
        default: Any = None
        if is_array:
            # arrays default to empty unless the JSON says "null"; () stands for "empty"
            default = None if raw.get("default") == "null" else ()
        elif sub is None:
            default = _default(elem, nullable, raw.get("default"))
        tag = raw.get("tag")
        result.append(
            FieldSpec(
                name=snake_case(raw["name"]),
                json_name=raw["name"],
                type=elem,
                is_array=is_array,
                versions=Versions.parse(raw["versions"]),
                nullable=nullable,
                tagged=Versions.parse(raw.get("taggedVersions")),
                tag=None if tag is None else int(tag),
                flexible=(
                    Versions.parse(raw["flexibleVersions"]) if "flexibleVersions" in raw else None
                ),
                ignorable=bool(raw.get("ignorable", False)),
                default=default,
                fields=sub,
            )
        )
    return result


def load_message(file_name: str) -> MessageSpec:
    """Parse one ``schema/<Name>.json`` file."""
    text = (SCHEMA_DIR / file_name).read_text("utf-8")
    raw = json.loads(strip_comments(text))
    common = {c["name"]: c["fields"] for c in raw.get("commonStructs", [])}
    fields = _build_fields(raw["fields"], common)
    return MessageSpec(
        name=raw["name"],
        kind=raw["type"],
        api_key=raw.get("apiKey"),
        valid=Versions.parse(raw["validVersions"]),
        flexible=Versions.parse(raw["flexibleVersions"]),
        fields=fields,
    )
