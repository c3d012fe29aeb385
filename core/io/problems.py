"""Where an import file is broken, said the same way by every reader: the line and column of bad JSON or bad UTF-8."""

from __future__ import annotations

import json
from pathlib import Path


def json_what(exc: json.JSONDecodeError) -> str:
    """What is wrong, without where: json's own message ends some texts with "at" ("Unterminated string starting
    at"), which a naive "{msg} at line" would double."""
    return exc.msg.removesuffix(" at").removesuffix(" starting")


def json_problem(exc: json.JSONDecodeError) -> str:
    """``exc`` as "what, at line L, column C"."""
    return f"{json_what(exc)}, at line {exc.lineno}, column {exc.colno}"


def utf8_problem(source: str | Path | bytes) -> str:
    """Where the first byte that is not UTF-8 is in a file (or bytes): "line L, column C (byte B)".

    Readers call it after a UnicodeDecodeError, whose own offset is relative to a decoder's chunk, not the file."""
    data = source if isinstance(source, bytes) else Path(source).expanduser().read_bytes()
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line_start = data.rfind(b"\n", 0, exc.start) + 1
        column = len(data[line_start : exc.start].decode("utf-8", errors="replace")) + 1
        line = data.count(b"\n", 0, exc.start) + 1
        return f"line {line}, column {column} (byte {exc.start}: {exc.reason})"
    return "no byte that is not UTF-8"
