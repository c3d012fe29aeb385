"""A tiny OpenAI-compatible chat server for tests, on 127.0.0.1 with a free port, told what to answer.

Use it as a context manager; leaving the block stops the server and joins every thread it started, so a test never
leaves a thread behind (a slow answer is cut short when the server closes).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self


def completion(content: str) -> dict[str, Any]:
    """A chat completion body whose first choice says ``content``."""
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "model": "test-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
    }


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        owner = self.server.owner
        owner.requests.append({"path": self.path, "headers": dict(self.headers), "body": json.loads(raw or b"null")})
        status, body, content_type = owner.reply
        if self.path != "/v1/chat/completions":
            status, body, content_type = 404, b'{"error": "not found"}', "application/json"
        if owner.delay:
            # Waits on an event rather than sleeping, so closing the server ends the wait at once.
            owner.released.wait(owner.delay)
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test); nothing to answer

    def log_message(self, format: str, *args: Any) -> None:
        """Keep test output quiet."""


class _Server(ThreadingHTTPServer):
    daemon_threads = False  # joined by server_close(), so no handler outlives the server
    owner: FakeLLMServer


class FakeLLMServer:
    """An OpenAI-compatible ``POST /v1/chat/completions`` endpoint whose answer the test chooses.

    ``requests`` records every request (path, headers, parsed JSON body). By default it answers ``{}`` as content.
    """

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.reply: tuple[int, bytes, str] = (200, b"", "application/json")
        self.delay = 0.0
        self.released = threading.Event()
        self.answer_json({})
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.owner = self
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), name="fake-llm-server")

    @property
    def base_url(self) -> str:
        """The URL to configure as ``LLMConfig.base_url``."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def answer_json(self, value: Any) -> None:
        """Answer with a completion whose content is ``value`` serialised as JSON."""
        self.answer_content(json.dumps(value))

    def answer_content(self, content: str) -> None:
        """Answer with a completion whose message content is ``content`` verbatim."""
        self.answer_raw(200, json.dumps(completion(content)))

    def answer_raw(self, status: int, body: str, content_type: str = "application/json") -> None:
        """Answer with this HTTP status and body, whatever the request."""
        self.reply = (status, body.encode("utf-8"), content_type)

    def answer_slowly(self, seconds: float) -> None:
        """Wait ``seconds`` (or until the server closes) before answering."""
        self.delay = seconds

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.released.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
