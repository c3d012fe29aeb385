"""Optional embeddings: the /embeddings client, storing vectors, and bm25 fused with vector search."""

from __future__ import annotations

import hashlib
import json
import re
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memlens import MemoryStore, db, schema
from memlens.cli import main
from memlens.embeddings import EmbeddingClient, EmbeddingConfig, EmbeddingError, parse_embeddings

DIM = 64
# Words a reader would take as meaning the same thing: the fake model maps them to one vector component, so a query
# and a memory that share no word can still be close.
SYNONYMS = {"automobile": "car", "vehicle": "car", "sedan": "car", "feline": "cat", "kitten": "cat", "garage": "parking"}


def fake_vector(text: str) -> list[float]:
    """A deterministic bag-of-words embedding: one hashed component per word (after the synonym table)."""
    vector = [0.0] * DIM
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        word = SYNONYMS.get(word, word)
        vector[int(hashlib.sha256(word.encode()).hexdigest(), 16) % DIM] += 1.0
    return vector


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_POST(self) -> None:
        owner = self.server.owner
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"null")
        owner.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
        if owner.reply is not None:
            status, raw = owner.reply
        elif self.path != "/v1/embeddings":
            status, raw = 404, b'{"error": "not found"}'
        else:
            data = [{"object": "embedding", "index": i, "embedding": fake_vector(t)} for i, t in enumerate(body["input"])]
            data.reverse()  # out of order on purpose: the client must put them back by "index"
            status, raw = 200, json.dumps({"object": "list", "model": body["model"], "data": data}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, format: str, *args: Any) -> None:
        """Keep test output quiet."""


class _Server(ThreadingHTTPServer):
    daemon_threads = False  # joined by server_close()
    owner: FakeEmbeddingServer


class FakeEmbeddingServer:
    """An OpenAI-compatible ``POST /v1/embeddings`` on 127.0.0.1 answering ``fake_vector`` per input, or ``reply``."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.reply: tuple[int, bytes] | None = None
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.owner = self
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), name="fake-embedding-server")
        self._thread.start()

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def answer(self, status: int, body: Any) -> None:
        """Answer every request with this status and body (a str is sent verbatim, anything else as JSON)."""
        self.reply = (status, (body if isinstance(body, str) else json.dumps(body)).encode())

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


@pytest.fixture
def server() -> Iterator[FakeEmbeddingServer]:
    s = FakeEmbeddingServer()
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def client(server: FakeEmbeddingServer) -> EmbeddingClient:
    return EmbeddingClient(EmbeddingConfig(base_url=server.base_url, model="fake-embed"))


@pytest.fixture(autouse=True)
def _no_embedding_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("MEMLENS_EMBED_BASE_URL", "MEMLENS_EMBED_MODEL", "MEMLENS_EMBED_API_KEY", "MEMLENS_EMBED_TIMEOUT", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)


def vector_rows(store: MemoryStore) -> list[tuple[int, str, int, bytes]]:
    return store.conn.execute("SELECT memory_id, model, dim, vector FROM memory_vectors ORDER BY memory_id").fetchall()


def refused_url() -> str:
    """A loopback URL on a port nobody listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


# --- schema ---------------------------------------------------------------------------------------------------


def test_a_fresh_store_has_the_vector_table_at_the_new_version(store):
    assert schema.SCHEMA_VERSION >= 3
    assert store.conn.execute("PRAGMA user_version").fetchone()[0] == schema.SCHEMA_VERSION
    tables = {r[0] for r in store.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "memory_vectors" in tables


def test_a_version_2_store_is_migrated_and_keeps_its_memories(db_path, t0):
    with MemoryStore.open(db_path) as s:
        kept = s.remember("the build uses ninja", now=t0).id
    # Turn the file back into what a schema-2 memlens wrote.
    conn = db.sqlite.connect(str(db_path), isolation_level=None)
    conn.execute("DROP TRIGGER memory_vectors_stale")
    conn.execute("DROP TABLE memory_vectors")
    conn.execute("PRAGMA user_version = 2")
    conn.close()
    with MemoryStore.open(db_path) as s:
        assert s.conn.execute("PRAGMA user_version").fetchone()[0] == schema.SCHEMA_VERSION
        assert s.conn.execute("SELECT COUNT(*) FROM memory_vectors").fetchone()[0] == 0
        assert s.get(kept).content == "the build uses ninja"


def test_a_version_2_store_opened_read_only_searches_with_bm25(db_path, t0, client, server):
    with MemoryStore.open(db_path) as s:
        kept = s.remember("the build uses ninja", now=t0).id
    conn = db.sqlite.connect(str(db_path), isolation_level=None)
    conn.execute("DROP TRIGGER memory_vectors_stale")
    conn.execute("DROP TABLE memory_vectors")
    conn.execute("PRAGMA user_version = 2")
    conn.close()
    with MemoryStore.open(db_path, readonly=True) as s:
        hits = s.search("ninja build", embedder=client, now=t0)
    assert [h.memory.id for h in hits] == [kept]
    assert not hits[0].fused


# --- the client -----------------------------------------------------------------------------------------------


def test_embed_batches_and_keeps_the_order(server):
    texts = [f"text number {i}" for i in range(5)]
    vectors = EmbeddingClient(EmbeddingConfig(base_url=server.base_url, model="fake-embed"), batch=2).embed(texts)
    assert vectors.dtype == np.float32 and vectors.shape == (5, DIM)
    assert np.array_equal(vectors, np.asarray([fake_vector(t) for t in texts], dtype=np.float32))
    assert [len(r["body"]["input"]) for r in server.requests] == [2, 2, 1]
    assert all(r["path"] == "/v1/embeddings" and r["body"]["model"] == "fake-embed" for r in server.requests)


def test_the_key_is_sent_as_a_bearer_token(server, monkeypatch):
    monkeypatch.setenv("MEMLENS_EMBED_BASE_URL", server.base_url)
    monkeypatch.setenv("MEMLENS_EMBED_MODEL", "fake-embed")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key")
    config = EmbeddingConfig.from_env()
    assert config is not None and config.api_key == "sk-test-key"
    EmbeddingClient(config).embed(["hello"])
    assert server.requests[0]["headers"]["Authorization"] == "Bearer sk-test-key"


def test_configuration_from_the_environment():
    assert EmbeddingConfig.from_env({}) is None
    with pytest.raises(EmbeddingError, match="MEMLENS_EMBED_MODEL is not set"):
        EmbeddingConfig.from_env({"MEMLENS_EMBED_BASE_URL": "http://localhost:1/v1"})
    with pytest.raises(EmbeddingError, match="http"):
        EmbeddingConfig.from_env({"MEMLENS_EMBED_BASE_URL": "localhost:1", "MEMLENS_EMBED_MODEL": "m"})
    with pytest.raises(EmbeddingError, match="TIMEOUT"):
        EmbeddingConfig.from_env({"MEMLENS_EMBED_BASE_URL": "http://localhost:1/v1", "MEMLENS_EMBED_MODEL": "m", "MEMLENS_EMBED_TIMEOUT": "soon"})
    config = EmbeddingConfig.from_env(
        {"MEMLENS_EMBED_BASE_URL": "http://localhost:1/v1/", "MEMLENS_EMBED_MODEL": "m", "MEMLENS_EMBED_API_KEY": "k", "OPENAI_API_KEY": "o"}
    )
    assert config == EmbeddingConfig(base_url="http://localhost:1/v1", model="m", api_key="k")


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ({"data": [{"embedding": [1.0]}]}, "1 vectors for 2 texts"),
        ({"vectors": []}, "no data list"),
        ([1, 2], "no data list"),
        ({"data": [{"embedding": [1.0, 2.0]}, {"embedding": [1.0]}]}, "has 1 dimensions, the first had 2"),
        ({"data": [{"embedding": [1.0, "x"]}, {"embedding": [1.0, 2.0]}]}, "not a finite number"),
        ({"data": [{"embedding": [1.0, True]}, {"embedding": [1.0, 2.0]}]}, "not a finite number"),
        ({"data": [{"embedding": []}, {"embedding": []}]}, "is empty"),
        ({"data": [{"vector": [1.0]}, {"embedding": [1.0]}]}, "no embedding list"),
        ({"data": [{"embedding": [1.0], "index": 0}, {"embedding": [2.0], "index": 0}]}, "distinct position"),
    ],
)
def test_malformed_answers_are_rejected_by_name(answer, message):
    with pytest.raises(EmbeddingError, match=message):
        parse_embeddings(answer, 2)


# --- storing vectors ------------------------------------------------------------------------------------------


def test_embed_pending_fills_vectors_once_and_audits_without_text(store, t0, client, server):
    ids = [store.remember(text, now=t0, supersede=False).id for text in ("alpha beta", "gamma delta", "epsilon zeta")]
    seen: list[tuple[int, int]] = []
    assert store.embed_pending(client, batch=2, progress=lambda done, total: seen.append((done, total)), now=t0) == 3
    rows = vector_rows(store)
    assert [r[0] for r in rows] == ids
    assert all(model == "fake-embed" and dim == DIM and len(blob) == DIM * 4 for _id, model, dim, blob in rows)
    first = np.frombuffer(rows[0][3], dtype="<f4")
    assert np.array_equal(first, np.asarray(fake_vector("alpha beta"), dtype=np.float32))
    assert seen == [(2, 3), (3, 3)]
    assert len(server.requests) == 2

    assert store.embed_pending(client, now=t0) == 0  # idempotent: nothing pending, no request made
    assert len(server.requests) == 2
    newer = store.remember("eta theta", now=t0).id
    assert store.embed_pending(client, now=t0) == 1
    assert [r[0] for r in vector_rows(store)] == [*ids, newer]
    assert store.vector_counts() == {"fake-embed": 4}

    entries = [e for e in store.audit(limit=50) if e.operation == "embed"]
    assert len(entries) == 3
    assert sorted(e.details["stored"] for e in entries) == [0, 1, 3]
    assert all(e.details["model"] == "fake-embed" for e in entries)
    assert not any(word in json.dumps(e.details) for e in entries for word in ("alpha", "gamma", "theta"))


def test_embed_pending_respects_the_limit(store, t0, client):
    for text in ("one apple", "two pears", "three plums"):
        store.remember(text, now=t0, supersede=False)
    assert store.embed_pending(client, limit=2, now=t0) == 2
    assert store.embed_pending(client, now=t0) == 1


@pytest.mark.parametrize(
    ("status", "body", "message"),
    [
        (200, {"data": []}, "0 vectors for 2 texts"),
        (200, "not json at all", "non-JSON"),
        (500, {"error": "model not loaded"}, "HTTP 500"),
        (200, {"data": [{"embedding": [0.5, "NaN"]}, {"embedding": [0.5, 0.5]}]}, "not a finite number"),
    ],
)
def test_a_bad_answer_raises_and_writes_no_vector(store, t0, client, server, status, body, message):
    store.remember("alpha beta", now=t0)
    store.remember("gamma delta", now=t0)
    server.answer(status, body)
    with pytest.raises(EmbeddingError, match=message):
        store.embed_pending(client, now=t0)
    assert vector_rows(store) == []
    failed = [e for e in store.audit(limit=10) if e.operation == "embed"]
    assert len(failed) == 1 and failed[0].details["failed"] is True and failed[0].details["stored"] == 0


def test_an_unreachable_endpoint_raises_and_writes_no_vector(store, t0):
    store.remember("alpha beta", now=t0)
    unreachable = EmbeddingClient(EmbeddingConfig(base_url=refused_url(), model="fake-embed", timeout=5))
    with pytest.raises(EmbeddingError, match="refused the connection"):
        store.embed_pending(unreachable, now=t0)
    assert vector_rows(store) == []


def test_forgetting_a_memory_erases_its_vector(store, t0, client):
    gone = store.remember("the staging password rotates monthly", now=t0).id
    kept = store.remember("the build uses ninja", now=t0).id
    store.embed_pending(client, now=t0)
    store.forget(gone, reason="test", now=t0)
    assert [r[0] for r in vector_rows(store)] == [kept]


def test_a_vector_whose_text_changed_in_place_is_dropped(store, t0, client):
    """Text never changes in place through the API, but an import refresh or a repair may rewrite it: the old vector
    then no longer describes the memory and must not be used."""
    changed = store.remember("the build uses ninja", now=t0).id
    kept = store.remember("the kitten sleeps on the sofa", now=t0).id
    store.embed_pending(client, now=t0)
    with store.ctx.write() as conn:
        conn.execute("UPDATE memories SET content = 'the build uses make' WHERE id = ?", (changed,))
    assert [r[0] for r in vector_rows(store)] == [kept]


def test_a_read_only_store_refuses_to_embed(db_path, t0, client, server):
    with MemoryStore.open(db_path) as s:
        s.remember("alpha beta", now=t0)
    with MemoryStore.open(db_path, readonly=True) as s, pytest.raises(Exception, match="read-only"):
        s.embed_pending(client, now=t0)
    assert server.requests == []


# --- search ---------------------------------------------------------------------------------------------------


@pytest.fixture
def garage(store, t0, client) -> dict[str, int]:
    """Memories where only the synonym table links the car question to its answer."""
    ids = {
        "car": store.remember("The automobile is parked in the garage", now=t0, project="home").id,
        "bike": store.remember("Where the bicycle pump lives: the hallway cupboard", now=t0, project="home").id,
        "cat": store.remember("The kitten sleeps on the sofa", now=t0, project="home").id,
        "office": store.remember("The sedan of the boss uses the office lot", now=t0, project="work").id,
    }
    store.embed_pending(client, now=t0)
    return ids


def test_semantic_search_finds_a_memory_sharing_no_word_with_the_query(store, t0, client, garage):
    assert garage["car"] not in [h.memory.id for h in store.search("where is my car", now=t0)]
    hits = store.search("where is my car", embedder=client, now=t0)
    ids = [h.memory.id for h in hits]
    assert garage["car"] in ids
    car = next(h for h in hits if h.memory.id == garage["car"])
    assert car.fused and car.vector_rank is not None and car.bm25 == 0.0
    assert "fused from bm25 and embeddings" in car.explain() and "cosine share" in car.explain()
    assert car.to_dict()["vector_rank"] == car.vector_rank


def test_fusion_keeps_the_bm25_hits(store, t0, client, garage):
    plain = [h.memory.id for h in store.search("car pump", now=t0)]
    assert plain == [garage["bike"]]  # "pump" is the only word it shares with any memory
    hits = store.search("car pump", embedder=client, now=t0)
    fused = [h.memory.id for h in hits]
    assert garage["bike"] in fused and garage["car"] in fused
    assert all(h.fused for h in hits)


def test_semantic_candidates_obey_the_filters(store, t0, client, garage):
    ids = [h.memory.id for h in store.search("vehicle", embedder=client, project="home", now=t0)]
    assert garage["car"] in ids and garage["office"] not in ids
    ids = [h.memory.id for h in store.search("vehicle", embedder=client, project="work", now=t0)]
    assert ids == [garage["office"]]


def test_semantic_false_and_raw_queries_use_bm25_only(store, t0, client, server, garage):
    before = len(server.requests)
    plain = store.search("car pump", now=t0)
    assert [h.memory.id for h in plain] == [garage["bike"]]
    assert store.search("car pump", embedder=client, semantic=False, now=t0) == plain
    raw = store.search("pump", embedder=client, raw=True, now=t0)
    assert [h.memory.id for h in raw] == [garage["bike"]] and not raw[0].fused
    assert len(server.requests) == before


def test_search_falls_back_to_bm25_when_the_endpoint_fails(store, t0, client, server, garage, caplog):
    expected = [h.memory.id for h in store.search("car pump", now=t0)]
    assert expected == [garage["bike"]]
    server.answer(500, {"error": "overloaded"})
    hits = store.search("car pump", embedder=client, now=t0)
    assert [h.memory.id for h in hits] == expected
    assert not any(h.fused for h in hits)
    assert "semantic search skipped" in caplog.text


def test_semantic_true_uses_the_environment_and_survives_a_dead_endpoint(store, t0, server, garage, monkeypatch):
    monkeypatch.setenv("MEMLENS_EMBED_BASE_URL", server.base_url)
    monkeypatch.setenv("MEMLENS_EMBED_MODEL", "fake-embed")
    assert garage["car"] in [h.memory.id for h in store.search("where is my car", semantic=True, now=t0)]
    assert garage["car"] not in [h.memory.id for h in store.search("where is my car", now=t0)]  # off by default
    monkeypatch.setenv("MEMLENS_EMBED_BASE_URL", refused_url())
    assert [h.memory.id for h in store.search("car pump", semantic=True, now=t0)] == [garage["bike"]]


def test_vectors_of_another_model_are_not_compared(store, t0, server, garage):
    other = EmbeddingClient(EmbeddingConfig(base_url=server.base_url, model="another-model"))
    hits = store.search("car pump", embedder=other, now=t0)
    assert [h.memory.id for h in hits] == [garage["bike"]]
    assert not any(h.fused for h in hits)


# --- the command line -----------------------------------------------------------------------------------------


def test_the_embed_command(db_path: Path, t0, server, capsys):
    with MemoryStore.open(db_path) as s:
        s.remember("alpha beta", now=t0)
        s.remember("gamma delta", now=t0)
    args = ["--db", str(db_path), "embed", "--base-url", server.base_url, "--model", "fake-embed", "--json"]
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out) == {"model": "fake-embed", "stored": 2, "vectors": 2}
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)["stored"] == 0


def test_the_embed_command_needs_an_endpoint(db_path: Path, capsys):
    assert main(["--db", str(db_path), "embed"]) == 2
    assert "no embedding endpoint" in capsys.readouterr().err


def test_the_embed_command_reports_a_dead_endpoint(db_path: Path, t0, capsys):
    with MemoryStore.open(db_path) as s:
        s.remember("alpha beta", now=t0)
    assert main(["--db", str(db_path), "embed", "--base-url", refused_url(), "--model", "m"]) == 1
    assert "refused the connection" in capsys.readouterr().err


def test_cli_search_semantic_uses_the_configured_endpoint(db_path, t0, server, monkeypatch, capsys):
    import json as _json

    from memlens.cli import main

    with MemoryStore.open(db_path) as s:
        car = s.remember("The automobile is parked in the garage", now=t0).id
    monkeypatch.setenv("MEMLENS_EMBED_BASE_URL", server.base_url)
    monkeypatch.setenv("MEMLENS_EMBED_MODEL", "fake-embed")
    assert main(["--db", str(db_path), "embed", "--json"]) == 0
    capsys.readouterr()
    assert main(["--db", str(db_path), "search", "where is my car", "--json"]) == 0
    assert _json.loads(capsys.readouterr().out) == []  # bm25 alone: no shared word
    assert main(["--db", str(db_path), "search", "where is my car", "--semantic", "--json"]) == 0
    assert [h["memory"]["id"] for h in _json.loads(capsys.readouterr().out)] == [car]
