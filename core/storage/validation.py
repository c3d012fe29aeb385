"""Checking what callers pass to a store: each ``check_*`` returns the value cleaned, or raises InvalidInput.

Every public method of the store's repositories checks its arguments here first, so the messages are the same
whichever way a value arrives (Python API, CLI, MCP, GUI, an import file). Text is cleaned (control characters,
lone surrogates) and tags and metadata are redacted, because they are indexed and shown like the text itself.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta, timezone
from typing import Any

from memlens.errors import InvalidInput
from memlens.models import DEFAULT_LAYER_FOR_TYPE, Layer, Origin, ts_from_dt
from memlens.redact import redact, redact_value
from memlens.text import MAX_CONTENT_CHARS, clean_text

LAYERS = tuple(layer.value for layer in Layer)
ORIGINS = tuple(origin.value for origin in Origin)
MAX_ID = 2**63 - 1  # SQLite's largest INTEGER
#: The earliest and latest time memlens accepts anywhere (a --now, a stored or imported time, a filter). Python and
#: SQLite both hold years 1 to 9999; the upper bound leaves room for the longest TTL and for what memlens derives
#: from a time (an expiry, a grace period, a projection), so no arithmetic on an accepted time can leave the calendar.
MIN_TIME = datetime(1970, 1, 1, tzinfo=timezone.utc)
MAX_TIME = datetime(8000, 1, 1, tzinfo=timezone.utc)
#: The longest time to live, in days (1,000 years), and so the latest expiry a memory can have.
MAX_TTL_DAYS = 365_000
MAX_EXPIRY = MAX_TIME + timedelta(days=MAX_TTL_DAYS)




def check_text(value: Any, name: str, *, allow_empty: bool = False) -> str:
    """Text cleaned of control characters, at most MAX_CONTENT_CHARS long, and not blank unless ``allow_empty``."""
    if not isinstance(value, str):
        raise InvalidInput(f"{name} must be text, not {type(value).__name__}")
    value = clean_text(value)
    if len(value) > MAX_CONTENT_CHARS:
        raise InvalidInput(f"{name} is {len(value):,} characters; the limit is {MAX_CONTENT_CHARS:,}")
    if not allow_empty and not value.strip():
        raise InvalidInput(f"{name} must not be empty")
    return value


def check_optional_name(value: Any, name: str) -> str | None:
    """A short name (project, session id, source reference) cleaned and stripped; None when absent or blank."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidInput(f"{name} must be text, not {type(value).__name__}")
    value = clean_text(value).strip()
    if len(value) > 500:
        raise InvalidInput(f"{name} is too long (at most 500 characters)")
    return value or None


def check_importance(value: Any) -> float | None:
    """An importance between 0 and 1, or None when not given."""
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InvalidInput(f"importance must be a number between 0 and 1, not {value!r}") from None
    if not math.isfinite(number) or not 0.0 <= number <= 1.0:
        raise InvalidInput(f"importance must be between 0 and 1, not {value!r}")
    return number


def check_ttl(value: Any) -> float | None:
    """A time to live in days (positive, at most 1,000 years), or None when not given."""
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InvalidInput(f"ttl_days must be a positive number of days, not {value!r}") from None
    if not math.isfinite(number) or number <= 0 or number > MAX_TTL_DAYS:
        raise InvalidInput(f"ttl_days must be a positive number of days, at most {MAX_TTL_DAYS:,.0f}, not {value!r}")
    return number


def check_tags(value: Any) -> tuple[str, ...]:
    """Tags from a list or a comma-separated text: cleaned, redacted, without duplicates, at most 50 of 100 characters."""
    if value is None:
        return ()
    if isinstance(value, str):
        value = [t for t in value.split(",")]
    if not isinstance(value, (list, tuple, set, frozenset)):
        raise InvalidInput(f"tags must be a list of strings, not {type(value).__name__}")
    tags: list[str] = []
    for tag in value:
        if not isinstance(tag, str):
            raise InvalidInput(f"each tag must be text, not {type(tag).__name__}")
        tag = " ".join(redact(clean_text(tag).replace("\x00", ""))[0].split())  # tags are indexed and shown like text
        if len(tag) > 100:
            raise InvalidInput("a tag is at most 100 characters")
        if tag and tag not in tags:
            tags.append(tag)
    if len(tags) > 50:
        raise InvalidInput("a memory has at most 50 tags")
    return tuple(tags)


def check_metadata(value: Any) -> dict[str, Any]:
    """A JSON-serialisable mapping of bounded size, its text cleaned; ``{}`` when not given."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidInput(f"metadata must be a JSON object, not {type(value).__name__}")
    try:
        text = json.dumps(dict(value), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"metadata must be JSON-serialisable: {exc}") from None
    if len(text) > MAX_CONTENT_CHARS:
        raise InvalidInput("metadata is too large")
    loaded: dict[str, Any] = json.loads(clean_text(text))
    return loaded


def check_layer(value: Any, type_: str) -> str:
    """A layer name; when not given, the default layer of the memory's type."""
    if value is None:
        return DEFAULT_LAYER_FOR_TYPE.get(type_, Layer.SEMANTIC).value
    value = value.value if isinstance(value, Layer) else value
    if value not in LAYERS:
        raise InvalidInput(f"layer must be one of {', '.join(LAYERS)}, not {value!r}")
    return str(value)


def check_type(value: Any) -> str:
    """A memory type: a short lower-case word (letters, digits, - or _)."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput("type must be a non-empty word such as fact, preference or workflow")
    value = value.strip().lower()
    if len(value) > 40 or not all(c.isalnum() or c in "-_" for c in value):
        raise InvalidInput(f"type must be a short word (letters, digits, - or _), not {value!r}")
    return value


def check_origin(value: Any) -> str:
    """An origin name (agent, user, tool, import, consolidation, ...)."""
    value = value.value if isinstance(value, Origin) else value
    if value not in ORIGINS:
        raise InvalidInput(f"origin must be one of {', '.join(ORIGINS)}, not {value!r}")
    return str(value)


def check_id(value: Any) -> int:
    """A memory id: a positive whole number (``"#12"`` and ``"12"`` are accepted)."""
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            value = int(str(value).lstrip("#"))
        except ValueError:
            raise InvalidInput(f"a memory id is a whole number, not {value!r}") from None
    if value <= 0:
        raise InvalidInput(f"a memory id is a positive number, not {value}")
    if value > MAX_ID:
        raise InvalidInput(f"a memory id is at most {MAX_ID}, not {value}")
    return int(value)



def check_whole(value: Any, name: str, *, minimum: int = 0) -> int:
    """A whole number from ``minimum`` to MAX_ID (the largest integer SQLite holds); a float such as 3.0 counts."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= MAX_ID:
        # Python refuses to print an int of more than 4,300 digits; say its size instead.
        shown = repr(value) if not isinstance(value, int) or value.bit_length() < 200 else f"a {value.bit_length()}-bit number"
        raise InvalidInput(f"{name} must be a whole number from {minimum} to {MAX_ID}, not {shown}")
    return value


def check_key(value: Any, name: str) -> str:
    """A text used to look something up (project, session id, operation), made safe to bind."""
    if not isinstance(value, str):
        raise InvalidInput(f"{name} must be text, not {type(value).__name__}")
    return clean_text(value)


def check_names(value: Any, name: str) -> list[Any]:
    """A filter that takes several values: one value alone, or a list, tuple or set of them."""
    if isinstance(value, (str, Layer)):
        return [value]
    if not isinstance(value, (list, tuple, set, frozenset)):
        raise InvalidInput(f"{name} must be a list, not {type(value).__name__}")
    return list(value)


def check_when(value: Any, name: str) -> float:
    """A time filter: an aware datetime between MIN_TIME and MAX_TIME, as stored epoch seconds."""
    return ts_from_dt(check_time(value, name))


def check_time(value: Any, name: str, *, latest: datetime = MAX_TIME) -> datetime:
    """An aware datetime between MIN_TIME and ``latest`` (MAX_TIME unless said; MAX_EXPIRY for an expiry), in UTC."""
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise InvalidInput(f"{name} must be a timezone-aware datetime, not {value!r}")
    try:
        when = value.astimezone(timezone.utc)  # 0001-01-01 at +01:00 is before year 1 in UTC: OverflowError
    except (OverflowError, ValueError):
        when = None
    if when is None or not MIN_TIME <= when <= latest:
        raise InvalidInput(f"{name} must be between {MIN_TIME:%Y-%m-%d} and {latest:%Y-%m-%d}, not {value.isoformat()}")
    return when


def check_count(value: Any, name: str) -> int:
    """A limit or offset: a whole number (negative means 0)."""
    try:
        return min(MAX_ID, max(0, int(value)))
    except (TypeError, ValueError, OverflowError):
        raise InvalidInput(f"{name} must be a whole number, not {value!r}") from None


def json_safe(value: Any) -> Any:
    """``value`` as plain JSON types (anything else as its text), for audit details."""
    return json.loads(json.dumps(value, default=str))


def redact_json(value: Any) -> tuple[Any, set[str]]:
    """A JSON value redacted by shape and by key name, and the rules that changed something: the one redaction of
    structured values (:func:`memlens.redact.redact_value`), under the name the storage layer uses."""
    return redact_value(value)


def redacted_metadata(metadata: Any, found: Iterable[Any]) -> dict[str, Any]:
    """Checked metadata with every string in it redacted, and ``metadata["redactions"]`` naming every rule
    that fired on the text (``found``) or on the metadata itself (callers such as observe pass their own)."""
    meta, rules = redact_json(check_metadata(metadata))
    rules |= {r.rule for r in found}
    previous = meta.get("redactions")
    if isinstance(previous, list):
        rules |= {p for p in previous if isinstance(p, str)}
    if rules:
        meta["redactions"] = sorted(rules)
    return dict(meta)
