"""SslPrincipalMapper: a client certificate's subject DN → the principal's name.

``ssl.principal.mapping.rules`` (Kafka's KIP-371 syntax) is a comma-separated
list of rules tried in order; the first that applies names the principal:

* ``DEFAULT`` — the DN itself (RFC 2253, ``CN=alice,OU=eng,O=acme,C=US``);
* ``RULE:pattern/replacement/`` with an optional ``L`` or ``U`` after the
  last slash — applies when the regular expression matches the whole DN, which
  is then rewritten with the replacement (``$1`` for a group; a backslash
  makes the next character literal, in the pattern and the replacement alike,
  so ``\\/`` and ``\\,`` are a slash and a comma) and lower- or upper-cased.

No rule applying is an error (Kafka's NoMatchingRule): the connection is
closed. The DN string is what Java's ``X500Principal.getName()`` gives, built
here from the certificate Python's ``ssl`` decoded (:func:`rfc2253_name`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = [
    "DEFAULT_RULES",
    "NoMatchingRule",
    "SslPrincipalMapper",
    "rfc2253_name",
]

DEFAULT_RULES = "DEFAULT"


class NoMatchingRule(ValueError):
    """No rule of ``ssl.principal.mapping.rules`` applies to a DN."""


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""  # "", "L" or "U"

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        out = self.pattern.sub(_java_replacement(self.replacement, self.pattern.groups), dn)
        if self.case == "L":
            return out.lower()
        if self.case == "U":
            return out.upper()
        return out

    def __str__(self) -> str:
        if self.pattern is None:
            return "DEFAULT"
        flag = f"/{self.case}" if self.case else ""
        return f"RULE:{self.pattern.pattern}/{self.replacement}{flag}"


def _java_replacement(text: str, groups: int) -> Callable[[re.Match[str]], str]:
    """A java.util.regex replacement string as a function of the match:
    ``$n`` / ``${name}`` name a group, a backslash quotes the next character;
    ``$n`` beyond the pattern's groups stays literal (as Kafka arranges)."""
    parts: list[tuple[bool, str | int]] = []  # (is a group reference, text or group)
    literal: list[str] = []

    def ref(group: str | int) -> None:
        if literal:
            parts.append((False, "".join(literal)))
            literal.clear()
        parts.append((True, group))

    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            literal.append(text[i + 1])
            i += 2
        elif c == "$" and i + 1 < len(text) and text[i + 1].isdigit():
            number, j = int(text[i + 1]), i + 2
            if number > groups:
                literal.append(text[i:j])
            else:
                # Java takes more digits while the number still names a group.
                while j < len(text) and text[j].isdigit() and number * 10 + int(text[j]) <= groups:
                    number, j = number * 10 + int(text[j]), j + 1
                ref(number)
            i = j
        elif text.startswith("${", i) and "}" in text[i:]:
            end = text.index("}", i)
            ref(text[i + 2 : end])
            i = end + 1
        else:
            literal.append(c)
            i += 1
    if literal:
        parts.append((False, "".join(literal)))

    def expand(m: re.Match[str]) -> str:
        return "".join(str(m.group(p) or "") if is_ref else str(p) for is_ref, p in parts)

    return expand


def _read_until_slash(text: str, i: int) -> tuple[str, int] | None:
    """Characters up to the next unescaped ``/`` (escapes kept), and the index after it."""
    out = []
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            out.append(text[i : i + 2])
            i += 2
            continue
        if c == "/":
            return "".join(out), i + 1
        out.append(c)
        i += 1
    return None


def _parse(rules: str) -> list[_Rule]:
    out: list[_Rule] = []
    text = rules.strip()
    i = 0
    while i < len(text):
        while i < len(text) and text[i].isspace():
            i += 1
        if text.startswith("DEFAULT", i):
            out.append(_Rule(None))
            i += len("DEFAULT")
        elif text.startswith("RULE:", i):
            start = i
            got = _read_until_slash(text, i + len("RULE:"))
            pattern = None if got is None else got[0]
            got = None if got is None else _read_until_slash(text, got[1])
            if pattern is None or got is None:
                end = text.find(",", start)
                bad = text[start:] if end < 0 else text[start:end]
                raise ValueError(f"Invalid rule: {bad}")
            replacement, i = got
            case = ""
            if i < len(text) and text[i] in "LU":
                case = text[i]
                i += 1
            try:
                compiled = re.compile(pattern)
            except re.error as e:
                raise ValueError(f"Invalid rule: RULE:{pattern}/{replacement}/: {e}") from e
            out.append(_Rule(compiled, replacement, case))
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            break
        if text[i] != ",":
            end = text.find(",", i)
            bad = text[i:] if end < 0 else text[i:end]
            raise ValueError(f"Invalid rule: unmatched substring `{bad}` in {rules!r}")
        i += 1
    return out


class SslPrincipalMapper:
    """The rules of ``ssl.principal.mapping.rules``; ValueError when they do not parse."""

    def __init__(self, rules: str | None = DEFAULT_RULES) -> None:
        self.rules = _parse(rules if rules is not None else DEFAULT_RULES)

    def name(self, dn: str) -> str:
        """The principal name of ``dn``; NoMatchingRule when no rule applies."""
        for rule in self.rules:
            got = rule.apply(dn)
            if got is not None:
                return got
        shown = ", ".join(str(r) for r in self.rules)
        raise NoMatchingRule(f"No rules apply to {dn}, rules [{shown}]")


# ---------------------------------------------------------------- the DN string

# The attribute keywords RFC 2253 (and Java's X500Principal) write by name.
_KEYWORDS = {
    "commonName": "CN",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}
# Others are written as OID=#<DER hex>, as Java does: their OIDs and string tags.
_BY_OID = {
    "emailAddress": ("1.2.840.113549.1.9.1", 0x16),  # IA5String
    "serialNumber": ("2.5.4.5", 0x13),  # PrintableString
    "title": ("2.5.4.12", 0x0C),
    "surname": ("2.5.4.4", 0x0C),
    "givenName": ("2.5.4.42", 0x0C),
    "initials": ("2.5.4.43", 0x0C),
    "generationQualifier": ("2.5.4.44", 0x0C),
    "dnQualifier": ("2.5.4.46", 0x13),
    "pseudonym": ("2.5.4.65", 0x0C),
    "postalCode": ("2.5.4.17", 0x0C),
    "businessCategory": ("2.5.4.15", 0x0C),
}


def _der_hex(tag: int, value: str) -> str:
    data = value.encode("utf-8")
    n = len(data)
    if n < 0x80:
        length = bytes([n])
    else:
        raw = n.to_bytes((n.bit_length() + 7) // 8, "big")
        length = bytes([0x80 | len(raw)]) + raw
    return "#" + (bytes([tag]) + length + data).hex()


def _escape(value: str) -> str:
    out = []
    for i, c in enumerate(value):
        if c in ',+"\\<>;' or (c == "#" and i == 0) or (c == " " and i in (0, len(value) - 1)):
            out.append("\\" + c)
        else:
            out.append(c)
    return "".join(out)


def rfc2253_name(subject: Sequence[Sequence[tuple[str, str]]]) -> str:
    """The RFC 2253 string of a subject as ``ssl.SSLSocket.getpeercert()``
    gives it (RDNs most significant first): most specific RDN first, RDNs
    joined by ``,``, multi-valued ones by ``+``."""
    rdns = []
    for rdn in reversed(subject):
        avas = []
        for name, value in rdn:
            keyword = _KEYWORDS.get(name)
            if keyword is not None:
                avas.append(f"{keyword}={_escape(value)}")
            elif name in _BY_OID:
                oid, tag = _BY_OID[name]
                avas.append(f"{oid}={_der_hex(tag, value)}")
            else:
                avas.append(f"{name}={_escape(value)}")
        rdns.append("+".join(avas))
    return ",".join(rdns)
