"""JaasConfig: the login module of a ``sasl.jaas.config`` value.

Kafka configures SASL with JAAS text, one login module per key::

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_alice="alice-secret";

— the module's class, a control flag (``required``, ``requisite``,
``sufficient``, ``optional``), ``name=value`` options (values in double
quotes, where a backslash escapes the next character, or bare words) and a
closing ``;``. On a broker the key is per listener and mechanism,
``listener.name.<listener>.<mechanism>.sasl.jaas.config``: the PLAIN module's
``user_<name>="<password>"`` options are the users PLAIN accepts, and
``username``/``password`` are what this broker logs in with to other brokers
(``sasl.mechanism.inter.broker.protocol``).

The text holds passwords: nothing here puts option values in messages.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = [
    "PLAIN_LOGIN_MODULE",
    "SCRAM_LOGIN_MODULE",
    "JaasConfig",
]

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
_FLAGS = ("required", "requisite", "sufficient", "optional")


def _tokens(text: str, key: str) -> list[tuple[str, bool]]:
    """(token, was quoted): words, ``=``, ``;`` and quoted strings."""
    out: list[tuple[str, bool]] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif c in "=;":
            out.append((c, False))
            i += 1
        elif c == '"':
            i += 1
            value: list[str] = []
            while i < n and text[i] != '"':
                if text[i] == "\\" and i + 1 < n:
                    i += 1
                value.append(text[i])
                i += 1
            if i >= n:
                raise ValueError(f"{key}: a quoted value is not closed")
            out.append(("".join(value), True))
            i += 1
        else:
            start = i
            while i < n and not text[i].isspace() and text[i] not in '=;"':
                i += 1
            out.append((text[start:i], False))
    return out


@dataclass(frozen=True)
class JaasConfig:
    """One login module: its class, control flag and options."""

    login_module: str
    control_flag: str
    options: Mapping[str, str] = field(default_factory=dict, repr=False)

    @classmethod
    def parse(cls, text: str, key: str = "sasl.jaas.config") -> JaasConfig:
        """The single login module of ``text``; ValueError (naming ``key``,
        never a value) when it does not parse or holds other than one module."""
        tokens = _tokens(text, key)
        modules: list[JaasConfig] = []
        i = 0
        while i < len(tokens):
            if i + 1 >= len(tokens):
                raise ValueError(f"{key}: expected a login module and a control flag")
            module, flag = tokens[i][0], tokens[i + 1][0].lower()
            if flag not in _FLAGS:
                raise ValueError(
                    f"{key}: the control flag of {module} must be one of {', '.join(_FLAGS)}"
                )
            i += 2
            options: dict[str, str] = {}
            while True:
                if i >= len(tokens):
                    raise ValueError(f"{key}: the login module {module} is not ended by ';'")
                if tokens[i] == (";", False):
                    i += 1
                    break
                if i + 2 >= len(tokens):
                    raise ValueError(f"{key}: an option of {module} is not name=value")
                name, eq, value = tokens[i], tokens[i + 1], tokens[i + 2]
                if name[1] or eq != ("=", False) or value == (";", False):
                    raise ValueError(f"{key}: an option of {module} is not name=value")
                options[name[0]] = value[0]
                i += 3
            modules.append(cls(module, flag, options))
        if len(modules) != 1:
            raise ValueError(f"{key}: must contain exactly one login module, found {len(modules)}")
        return modules[0]

    def plain_users(self) -> dict[str, str]:
        """PlainLoginModule's ``user_<name>`` options: user name → password."""
        return {k[len("user_") :]: v for k, v in self.options.items() if k.startswith("user_")}
