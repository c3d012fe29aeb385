"""POSTing JSON to OpenAI-compatible endpoints (chat completions, embeddings) with the standard library.

One place for what both clients need: no proxy for a model on this machine, a timeout, and every failure turned
into one readable line raised as the caller's own error class (``LLMError``, ``EmbeddingError``).
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import socket
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from memlens.errors import MemlensError

#: Longest piece of an endpoint's answer quoted in an error message.
SNIPPET_CHARS = 200


def snippet(value: Any) -> str:
    """A short one-line rendering of an answer (or any value) for an error message."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = " ".join(text.split())
    return (text if len(text) <= SNIPPET_CHARS else text[: SNIPPET_CHARS - 1] + "…") or "(empty)"


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class JsonEndpoint:
    """``POST url`` with a JSON body, answering parsed JSON; failures raise ``error`` naming ``what`` and the url."""

    def __init__(self, url: str, *, api_key: str | None, timeout: float, what: str, error: type[MemlensError]) -> None:
        self.url = url
        self.api_key = api_key
        self.timeout = timeout
        self.what = what
        self.error = error
        # A model on this machine is never behind the proxy that http_proxy names for the outside world.
        handlers = [urllib.request.ProxyHandler({})] if is_loopback(urlsplit(url).hostname or "") else []
        self._opener = urllib.request.build_opener(*handlers)

    def post(self, payload: Any) -> Any:
        """Send ``payload``; return the answer parsed as JSON."""
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(self.url, data=json.dumps(payload).encode("utf-8"), headers=headers, method="POST")
        body = self._send(request)
        try:
            return json.loads(body)
        except ValueError:
            raise self.error(f"{self.what} {self.url} answered with non-JSON: {snippet(body)}") from None

    def _send(self, request: urllib.request.Request) -> str:
        where = f"{self.what} {self.url}"
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                raw: bytes = response.read()
        except urllib.error.HTTPError as error:
            detail = snippet(error.read().decode("utf-8", "replace")) if error.fp else error.reason
            raise self.error(f"{where} answered HTTP {error.code}: {detail}") from None
        except urllib.error.URLError as error:
            reason = error.reason
            if isinstance(reason, (TimeoutError, socket.timeout)):
                raise self.error(f"{where} timed out after {self.timeout:g}s") from None
            if isinstance(reason, ConnectionRefusedError):
                raise self.error(f"{where} refused the connection (is the server running?)") from None
            raise self.error(f"cannot reach {where}: {snippet(str(reason))}") from None
        except TimeoutError:
            # Raised while reading the answer, after the connection succeeded.
            raise self.error(f"{where} timed out after {self.timeout:g}s") from None
        except (OSError, http.client.HTTPException) as error:
            raise self.error(f"{where} failed: {type(error).__name__}: {snippet(str(error))}") from None
        return raw.decode("utf-8", "replace")


def check_endpoint(base_url: str, model: str, timeout: float, *, what: str, error: type[MemlensError]) -> None:
    """Raise ``error`` unless ``base_url`` is an http(s) URL, ``model`` is named and ``timeout`` is positive."""
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise error(f"{what} base URL must be an http(s) URL, got {base_url!r}")
    if not model.strip():
        raise error(f"{what} model name is empty")
    if not timeout > 0:
        raise error(f"{what} timeout must be positive, got {timeout}")


def endpoint_from_env(
    env: Mapping[str, str], prefix: str, *, what: str, error: type[MemlensError]
) -> tuple[str, str, str | None, float] | None:
    """``(base_url, model, api_key, timeout)`` from ``{prefix}_BASE_URL``, ``_MODEL``, ``_API_KEY`` (or
    ``OPENAI_API_KEY``) and ``_TIMEOUT``; None when neither URL nor model is set. A half or malformed
    configuration raises ``error``, so a typo is reported instead of silently turning the feature off."""
    base_url = env.get(f"{prefix}_BASE_URL", "").strip()
    model = env.get(f"{prefix}_MODEL", "").strip()
    if not base_url and not model:
        return None
    if not base_url or not model:
        missing = f"{prefix}_MODEL" if base_url else f"{prefix}_BASE_URL"
        raise error(f"{what} is half configured: {missing} is not set")
    api_key = env.get(f"{prefix}_API_KEY", "").strip() or env.get("OPENAI_API_KEY", "").strip() or None
    raw_timeout = env.get(f"{prefix}_TIMEOUT", "").strip()
    try:
        timeout = float(raw_timeout) if raw_timeout else 30.0
    except ValueError:
        raise error(f"{prefix}_TIMEOUT must be a number of seconds, got {raw_timeout!r}") from None
    return base_url.rstrip("/"), model, api_key, timeout
