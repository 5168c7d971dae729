"""Client-supplied text in log lines.

Group ids, client ids, member ids, topic names and the like come from the
network: a group id holding a newline would forge a second log line, and one
of 30,000 characters would flood the log. Every log call that interpolates
such a string passes it through :func:`quoted`, which shows it as a Python
string literal (quotes, and control, non-printing and line-separator
characters escaped, so one record stays one line) and cuts it short.
"""

from __future__ import annotations

__all__ = ["MAX_QUOTED", "quoted"]

#: Characters of a client string shown in a log line; the rest is counted.
MAX_QUOTED = 256


def quoted(value: object, limit: int = MAX_QUOTED) -> str:
    """``value`` as a one-line literal, ``'my-group'``; None as ``None``.
    Longer than ``limit`` characters, it is cut and the rest counted."""
    if value is None:
        return "None"
    text = value if isinstance(value, str) else str(value)
    if len(text) > limit:
        return f"{text[:limit]!r}...(+{len(text) - limit} chars)"
    return repr(text)
