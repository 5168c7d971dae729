"""How the message browser shows a record's key, value and header values:
as text (UTF-8, undecodable bytes replaced), as JSON (pretty-printed, or
the text when the bytes are not JSON), or as hex. The result is plain text;
the templates escape it, so bytes holding HTML or script show as text."""

from __future__ import annotations

import contextlib
import json

__all__ = ["FORMATS", "render_bytes"]

FORMATS = ("text", "json", "hex")
# What one field shows at most; the rest is cut (a page of large records
# stays small).
MAX_SHOWN = 16 * 1024


def render_bytes(data: bytes | None, fmt: str) -> str | None:
    """``data`` shown as ``fmt``; None for a null key, value or header."""
    if data is None:
        return None
    cut = len(data) > MAX_SHOWN
    shown = bytes(data[:MAX_SHOWN])
    if fmt == "hex":
        text = shown.hex(" ")
    else:
        text = shown.decode("utf-8", errors="replace")
        if fmt == "json" and not cut:
            with contextlib.suppress(ValueError):  # not JSON: its text
                text = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    return text + f" … ({len(data)} bytes)" if cut else text
