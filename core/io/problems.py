"""Where an import file is broken, said the same way by every reader: the line and column of bad JSON or bad UTF-8."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from memlens.errors import InvalidInput

#: How deeply an import file's JSON may nest (objects and lists inside each other). Real exports nest a few levels;
#: far deeper input would exhaust Python's recursion limit in the decoder or in what handles the values later.
MAX_JSON_DEPTH = 100


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


def load_json(text: str) -> Any:
    """``json.loads`` for untrusted text: raises json.JSONDecodeError for bad JSON, and InvalidInput (saying what,
    not where) for JSON nested deeper than MAX_JSON_DEPTH or a number too long for Python to read."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise InvalidInput(f"the JSON is nested too deeply (at most {MAX_JSON_DEPTH} levels)") from None
    except json.JSONDecodeError:
        raise
    except ValueError as exc:  # an integer of more than 4,300 digits
        raise InvalidInput(f"the JSON holds a number memlens cannot read ({str(exc).split(':')[0]})") from None
    if json_depth(value) > MAX_JSON_DEPTH:
        raise InvalidInput(f"the JSON is nested too deeply (at most {MAX_JSON_DEPTH} levels)")
    return value


def json_depth(value: Any) -> int:
    """How many objects and lists deep ``value`` nests (a scalar is 0), counted without recursion."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in children)
    return deepest
