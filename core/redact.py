"""Redaction of secrets before anything is written.

Applied on every ingest path (remember, observe, hooks, MCP, import). Each rule replaces what it finds with
``[REDACTED:<rule>]`` and reports where, so a person can see what was hidden without seeing the secret.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

# Order matters: the most specific patterns come first so a key is named by its provider.
_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("private", re.compile(r"<private>.*?(?:</private>|\Z)", re.S | re.I)),
    (
        "private-key",
        re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)", re.S),
    ),
    ("anthropic-key", re.compile(r"\bsk-ant-[A-Za-z0-9_\-]{20,}")),
    ("openai-key", re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}")),
    ("aws-access-key", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("aws-secret-key", re.compile(r"(?i)aws_secret_access_key\s*[=:]\s*['\"]?[A-Za-z0-9/+=]{40}")),
    ("github-token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,})")),
    ("gitlab-token", re.compile(r"\bglpat-[A-Za-z0-9_\-]{20,}")),
    ("slack-token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}")),
    ("google-api-key", re.compile(r"\bAIza[0-9A-Za-z_\-]{35}")),
    ("stripe-key", re.compile(r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}")),
    ("huggingface-token", re.compile(r"\bhf_[A-Za-z0-9]{30,}")),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}")),
    ("bearer-token", re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/\-]{16,}=*")),
    ("url-credentials", re.compile(r"(?<=://)[^/\s:@]+:[^/\s@]+(?=@)")),
    (
        "assigned-secret",
        re.compile(
            r"(?i)\b(?:api[_-]?key|apikey|secret|access[_-]?token|auth[_-]?token|password|passwd|pwd)"
            r"(\s*[=:]\s*|\"\s*:\s*\"|'\s*:\s*')['\"]?[^\s'\"]{6,}"
        ),
    ),
)


@dataclass(frozen=True)
class Redaction:
    """One redacted span: the rule that matched and where it was in the original text."""

    rule: str
    start: int
    end: int


#: Every rule above needs one of these fragments (case aside): text without any of them holds nothing to redact,
#: and one search for them spares most texts the full pass (redaction runs on every ingested memory).
_ANCHORS = re.compile(
    r"(?i)<private>|private key-----|sk-|rk_|pk_|akia|asia|aws_secret_access_key|gh[pousr]_|github_pat_|glpat-|xox|"
    r"aiza|_live_|_test_|hf_|eyj|bearer|://|api[_-]?key|apikey|secret|access[_-]?token|auth[_-]?token|password|passwd|pwd"
)


def redact(text: str) -> tuple[str, list[Redaction]]:
    """``text`` with secrets replaced by ``[REDACTED:<rule>]``, and the list of what was replaced."""
    if not _ANCHORS.search(text):
        return text, []
    return _redact_all(text)


def _redact_all(text: str) -> tuple[str, list[Redaction]]:
    """Every rule applied in turn (what :func:`redact` does once a fragment of a secret is seen)."""
    found: list[Redaction] = []
    for rule, pattern in _RULES:
        def _sub(match: re.Match[str], rule: str = rule) -> str:
            found.append(Redaction(rule, match.start(), match.end()))
            if rule == "assigned-secret":
                # Keep the name of the setting ("password=") so the memory still reads sensibly.
                head = match.group(0)[: match.start(1) - match.start(0) + len(match.group(1))]
                return f"{head}[REDACTED:{rule}]"
            return f"[REDACTED:{rule}]"

        text = pattern.sub(_sub, text)
    return text, found


def redact_value(value: Any) -> tuple[Any, set[str]]:
    """A JSON value with every string in it redacted, and the rules that fired."""
    if isinstance(value, str):
        text, found = redact(value)
        return text, {f.rule for f in found}
    if isinstance(value, (list, tuple)):
        pairs = [redact_value(v) for v in value]
        return [v for v, _ in pairs], set().union(*(r for _, r in pairs))
    if isinstance(value, dict):
        rules: set[str] = set()
        out: dict[str, Any] = {}
        for key, item in value.items():
            out[str(key)], found_rules = redact_value(item)
            rules |= found_rules
        return out, rules
    return value, set()


def redact_text(text: str) -> str:
    """Just the redacted text."""
    return redact(text)[0]
