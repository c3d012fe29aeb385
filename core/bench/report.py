"""How the measuring tools (``python -m memlens.bench``, ``python -m memlens.eval.locomo``) report: progress
lines on standard error, the result as JSON in a file and as a table or JSON on standard output."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


def progress(message: str) -> None:
    """One progress line on standard error (standard output carries the result)."""
    print(f"... {message}", file=sys.stderr, flush=True)


def publish(result: Any, *, out: Path | None, as_json: bool, table: Callable[[Any], str]) -> None:
    """Write ``result`` as JSON to ``out`` (when given) and print it: as JSON with ``as_json``, else as ``table`` has it."""
    text = json.dumps(result, indent=2, default=str)
    if out:
        out.write_text(text + "\n")
    print(text if as_json else table(result))
