"""How well redaction does on a labelled set: recall on secrets, precision against look-alikes.

The shipped set (``memlens/data/redaction_eval.jsonl``, written by tests/data/make_redaction_eval.py) holds fake
secrets of real shapes and strings that only look like secrets (git SHAs, UUIDs, base64 images, lockfile hashes).
``memlens redact-check --eval [FILE]`` prints the figures; a file of one's own uses the same JSON lines:
``{"label": "secret"|"lookalike", "kind": "...", "text": "...", "secret": "..."}``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from memlens.errors import InvalidInput
from memlens.redact import redact

#: A leak is the secret whole, or this many of its characters in a row (a cut through it leaves a piece).
LEAK_FRAGMENT = 12


@dataclass
class EvalResult:
    """Counts over a labelled set and the records that went wrong (secrets that leaked, look-alikes changed)."""

    secrets: int = 0
    caught: int = 0
    lookalikes: int = 0
    false_positives: int = 0
    leaked: list[dict[str, Any]] = field(default_factory=list)
    flagged: list[dict[str, Any]] = field(default_factory=list)

    @property
    def recall(self) -> float:
        """Share of secrets with nothing of them left after redaction."""
        return self.caught / self.secrets if self.secrets else 1.0

    @property
    def precision(self) -> float:
        """Share of redacted records that held a secret (look-alikes changed count against it)."""
        hits = self.caught + self.false_positives
        return self.caught / hits if hits else 1.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "secrets": self.secrets,
            "caught": self.caught,
            "recall": round(self.recall, 4),
            "lookalikes": self.lookalikes,
            "false_positives": self.false_positives,
            "precision": round(self.precision, 4),
            "leaked": [{"kind": r["kind"], "text": r["redacted"][:200]} for r in self.leaked],
            "flagged": [{"kind": r["kind"], "text": r["redacted"][:200]} for r in self.flagged],
        }


def leaks(secret: str, text: str) -> bool:
    """Whether ``text`` still holds ``secret`` or a run of :data:`LEAK_FRAGMENT` of its characters."""
    if secret in text:
        return True
    if len(secret) <= LEAK_FRAGMENT * 2:
        return False
    return any(secret[i : i + LEAK_FRAGMENT] in text for i in range(0, len(secret) - LEAK_FRAGMENT + 1))


def load_labelled(path: str | Path | None = None) -> list[dict[str, Any]]:
    """The records of a labelled file (the shipped set when ``path`` is None); InvalidInput names a bad line."""
    if path is None:
        text = resources.files("memlens").joinpath("data", "redaction_eval.jsonl").read_text(encoding="utf-8")
        where = "the shipped redaction set"
    else:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidInput(f"cannot read {path}: {exc}") from None
        where = str(path)
    records = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as exc:
            raise InvalidInput(f"{where}, line {number}: not JSON ({exc})") from None
        ok = isinstance(record, dict) and isinstance(record.get("text"), str) and record.get("label") in ("secret", "lookalike")
        if not ok or (record["label"] == "secret" and not (isinstance(record.get("secret"), str) and record["secret"] and record["secret"] in record["text"])):
            raise InvalidInput(f"{where}, line {number}: needs label secret|lookalike, text, and for a secret the secret as it appears in the text")
        record.setdefault("kind", "")
        records.append(record)
    return records


def evaluate(records: list[dict[str, Any]]) -> EvalResult:
    """Redact each record's text and count: a secret is caught when nothing of it is left, a look-alike is a false
    positive when redaction changed it."""
    result = EvalResult()
    for record in records:
        redacted, _ = redact(record["text"])
        row = {**record, "redacted": redacted}
        if record["label"] == "secret":
            result.secrets += 1
            if leaks(record["secret"], redacted):
                result.leaked.append(row)
            else:
                result.caught += 1
        else:
            result.lookalikes += 1
            if redacted != record["text"]:
                result.false_positives += 1
                result.flagged.append(row)
    return result


def describe(result: EvalResult) -> str:
    """The figures as a person reads them, with every miss."""
    lines = [
        f"recall     {result.recall:.3f}  ({result.caught}/{result.secrets} secrets redacted)",
        f"precision  {result.precision:.3f}  ({result.false_positives}/{result.lookalikes} look-alikes changed)",
    ]
    lines += [f"  leaked   {r['kind']}: {r['redacted'][:160]!r}" for r in result.leaked]
    lines += [f"  flagged  {r['kind']}: {r['redacted'][:160]!r}" for r in result.flagged]
    return "\n".join(lines)
