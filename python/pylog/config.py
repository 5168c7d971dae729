"""Configuration keys: the machinery both of pylog's key tables are built from.

Kafka's ``ConfigDef``: a :class:`ConfigKey` gives a key's name, :class:`ConfigType`,
default, documentation and :class:`Validator` ("valid values"); a table is a
dict of them by name (:func:`config_table`). :meth:`ConfigKey.parse` takes a
value from a string (a ``server.properties`` file, ``--config k=v``) or a
Python value and raises InvalidConfigurationError naming the key and the value
when it is not of the key's type or range. :func:`parse_properties` reads a
Java properties file.

The tables themselves live with what they configure: the topic keys and the
broker's storage keys in :mod:`pylog.log.config` (LogConfig), the rest of the
broker's keys in :mod:`pylog.server.config` (KafkaConfig).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pylog.errors import InvalidConfigurationError

__all__ = [
    "INT_MAX",
    "INT_MIN",
    "LONG_MAX",
    "LONG_MIN",
    "AtLeast",
    "Between",
    "ConfigKey",
    "ConfigType",
    "IntOrDefault",
    "ListOf",
    "OneOf",
    "Validator",
    "config_table",
    "parse_properties",
    "show_value",
    "validate_props",
]

INT_MAX = 2**31 - 1
INT_MIN = -(2**31)
LONG_MAX = 2**63 - 1
LONG_MIN = -(2**63)


class ConfigType(enum.Enum):
    BOOLEAN = "boolean"
    INT = "int"
    LONG = "long"
    DOUBLE = "double"
    STRING = "string"
    LIST = "list"
    #: A secret (Kafka's PASSWORD): a string never shown by DescribeConfigs,
    #: the config tools or the log.
    PASSWORD = "password"


# ---------------------------------------------------------------- validators


class Validator:
    """Checks a parsed value; ``str()`` is the "valid values" column of the docs."""

    def check(self, value: Any) -> str | None:
        """None when valid, else why not."""
        raise NotImplementedError


class AtLeast(Validator):
    def __init__(self, minimum: int | float) -> None:
        self.minimum = minimum

    def check(self, value: Any) -> str | None:
        if value is not None and value < self.minimum:
            return f"value must be at least {self.minimum}"
        return None

    def __str__(self) -> str:
        return f"[{self.minimum},...]"


class Between(Validator):
    def __init__(self, low: int | float, high: int | float) -> None:
        self.low, self.high = low, high

    def check(self, value: Any) -> str | None:
        if value is not None and not (self.low <= value <= self.high):
            return f"value must be between {self.low} and {self.high}"
        return None

    def __str__(self) -> str:
        return f"[{self.low},...,{self.high}]"


class OneOf(Validator):
    """A string from a fixed set (case-sensitive, as Kafka's ``ValidString``)."""

    def __init__(self, *allowed: str) -> None:
        self.allowed = allowed

    def check(self, value: Any) -> str | None:
        if value is not None and value not in self.allowed:
            return f"string must be one of: {', '.join(self.allowed)}"
        return None

    def __str__(self) -> str:
        return "[" + ", ".join(self.allowed) + "]"


class ListOf(Validator):
    """Every element of a list from a fixed set."""

    def __init__(self, *allowed: str) -> None:
        self.allowed = allowed

    def check(self, value: Any) -> str | None:
        for item in value or ():
            if item not in self.allowed:
                return f"{item!r} is not one of: {', '.join(self.allowed)}"
        return None

    def __str__(self) -> str:
        return "[" + ", ".join(self.allowed) + "]"


class IntOrDefault(Validator):
    """-1 (the codec's default) or a value in ``[low, high]``."""

    def __init__(self, low: int, high: int) -> None:
        self.low, self.high = low, high

    def check(self, value: Any) -> str | None:
        if value is not None and value != -1 and not (self.low <= value <= self.high):
            return f"value must be -1 or between {self.low} and {self.high}"
        return None

    def __str__(self) -> str:
        return f"[-1, {self.low},...,{self.high}]"


def parse_host_counts(text: str) -> dict[str, int]:
    """``host:count`` pairs, comma separated (Kafka's ``getMap``, as
    ``max.connections.per.ip.overrides`` takes them); ValueError naming the
    bad entry."""
    out: dict[str, int] = {}
    for entry in (e.strip() for e in (text or "").split(",")):
        if not entry:
            continue
        host, sep, count = entry.rpartition(":")
        if not sep or not host.strip():
            raise ValueError(f"map entry {entry!r} is not of the form host:count")
        try:
            out[host.strip()] = int(count.strip())
        except ValueError:
            raise ValueError(f"{count.strip()!r} in {entry!r} is not a number") from None
    return out


class HostCounts(Validator):
    """``host:count,host:count`` with each count at least 0."""

    def check(self, value: Any) -> str | None:
        try:
            counts = parse_host_counts(str(value or ""))
        except ValueError as e:
            return str(e)
        bad = [h for h, n in counts.items() if n < 0]
        return f"the count of {bad[0]} must be at least 0" if bad else None

    def __str__(self) -> str:
        return "host:count,..."


# ---------------------------------------------------------------- keys


@dataclass(frozen=True)
class ConfigKey:
    """One configuration key: what it is, its default and what values it takes.

    ``server_default`` (topic keys) names the broker key that supplies the
    default when the topic does not set it.
    """

    name: str
    type: ConfigType
    default: Any
    doc: str
    validator: Validator | None = None
    importance: str = "medium"
    server_default: str | None = None
    internal: bool = False

    def parse(self, value: Any) -> Any:
        """Parse and validate ``value`` (a string or a Python value)."""
        parsed = _parse(self, value)
        if self.validator is not None:
            why = self.validator.check(parsed)
            if why is not None:
                raise _invalid(self.name, value, why)
        return parsed

    def help(self) -> str:
        """One line for ``--help``: name, type, default, valid values, doc."""
        valid = f", valid: {self.validator}" if self.validator is not None else ""
        default = show_value(self.default)
        return f"{self.name} ({self.type.value}, default: {default}{valid}) {self.doc}"


def show_value(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple)):
        return ",".join(value)
    return str(value)


def _invalid(name: str, value: Any, why: str) -> InvalidConfigurationError:
    return InvalidConfigurationError(f"Invalid value {value!r} for configuration {name}: {why}")


def _parse(key: ConfigKey, value: Any) -> Any:
    if value is None:
        return None
    t = key.type
    if isinstance(value, str):
        text = value.strip()
        if t is ConfigType.STRING:
            return text
        if t is ConfigType.PASSWORD:
            return value  # as given: a password's spaces are its own
        if t is ConfigType.LIST:
            return tuple(p.strip() for p in text.split(",") if p.strip()) if text else ()
        if t is ConfigType.BOOLEAN:
            low = text.lower()
            if low in ("true", "false"):
                return low == "true"
            raise _invalid(key.name, value, "expected true or false")
        if t is ConfigType.DOUBLE:
            try:
                return float(text)
            except ValueError:
                raise _invalid(key.name, value, "expected a number") from None
        try:
            value = int(text)
        except ValueError:
            raise _invalid(key.name, value, f"expected a {_int_kind(t)}") from None
    if t is ConfigType.BOOLEAN:
        if isinstance(value, bool):
            return value
        raise _invalid(key.name, value, "expected true or false")
    if t in (ConfigType.INT, ConfigType.LONG):
        if isinstance(value, bool) or not isinstance(value, int):
            raise _invalid(key.name, value, f"expected a {_int_kind(t)}")
        lo, hi = (INT_MIN, INT_MAX) if t is ConfigType.INT else (LONG_MIN, LONG_MAX)
        if not lo <= value <= hi:
            raise _invalid(key.name, value, f"expected a {_int_kind(t)}")
        return value
    if t is ConfigType.DOUBLE:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _invalid(key.name, value, "expected a number")
        return float(value)
    if t is ConfigType.LIST:
        if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
            return tuple(v.strip() for v in value)
        raise _invalid(key.name, value, "expected a comma-separated list")
    raise _invalid(key.name, value, "expected a string")


def _int_kind(t: ConfigType) -> str:
    return "32-bit integer" if t is ConfigType.INT else "64-bit integer"


def config_table(*keys: ConfigKey) -> dict[str, ConfigKey]:
    """A key table: ``keys`` by name, in the order given (the order docs list them)."""
    return {k.name: k for k in keys}


def validate_props(props: Mapping[str, Any], table: Mapping[str, ConfigKey]) -> dict[str, Any]:
    """Parsed values of the keys of ``table`` present in ``props`` (others
    ignored); raises on the first bad one."""
    return {name: table[name].parse(value) for name, value in props.items() if name in table}


def parse_properties(text: str) -> dict[str, str]:
    """``key=value`` / ``key: value`` lines of a Java properties file (comments
    with ``#`` or ``!``, trailing-backslash continuation)."""
    out: dict[str, str] = {}
    pending = ""
    for raw in text.splitlines():
        line = pending + raw.strip() if pending else raw.strip()
        pending = ""
        if not line or line[0] in "#!":
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending = line[:-1]
            continue
        cut = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if cut < 0:
            out[line] = ""
        else:
            out[line[:cut].strip()] = line[cut + 1 :].strip()
    return out
