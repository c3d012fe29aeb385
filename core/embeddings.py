"""Optional embeddings for search through any OpenAI-compatible ``/embeddings`` endpoint, standard library only.

Off by default: nothing here runs unless an endpoint is configured with ``MEMLENS_EMBED_BASE_URL`` (for example
``http://localhost:11434/v1``) and ``MEMLENS_EMBED_MODEL``, optionally ``MEMLENS_EMBED_API_KEY`` (or
``OPENAI_API_KEY``) and ``MEMLENS_EMBED_TIMEOUT``, or a caller passes an :class:`EmbeddingClient`. Asymmetric models
(e5, bge, nomic) want queries and documents marked differently: ``MEMLENS_EMBED_QUERY_PREFIX`` and
``MEMLENS_EMBED_DOCUMENT_PREFIX`` (e5: ``"query: "`` and ``"passage: "``) are put before each text, and
``MEMLENS_EMBED_QUERY_MODEL`` names another model for queries, for services that serve the two sides of one model
under two names. ``MEMLENS_EMBED_PROVIDER=local`` uses the optional in-process model instead of an endpoint
(:mod:`memlens.local_embeddings`, ``pip install 'memlens[local]'``); :func:`memlens.embedders.embedder_from_env`
picks. Vectors are kept in the store as float32 little-endian blobs (table ``memory_vectors``). The endpoint's answer
is never trusted: its shape, count and dimension are checked and any problem raises :class:`EmbeddingError`, so a
caller that catches it writes nothing. numpy is imported only inside the functions that need it (the agent hook path never
loads it).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from memlens.errors import MemlensError
from memlens.http_json import JsonEndpoint, check_endpoint, endpoint_from_env, snippet

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

#: Texts sent in one request: small enough for any server's batch limit, large enough to keep round trips few.
EMBED_BATCH = 64
#: Longest text sent for one memory (about 2,000 tokens, within the context of common embedding models).
MAX_INPUT_CHARS = 8000


class EmbeddingError(MemlensError):
    """The embedding endpoint could not be reached or its answer was unusable; the message names the problem."""


class Embedder(Protocol):
    """What storing vectors and searching with them need: :class:`EmbeddingClient` (an endpoint),
    :class:`memlens.local_embeddings.LocalEmbedder` (the optional in-process model), or a caller's own."""

    @property
    def model(self) -> str:
        """The name stored beside every vector; a query's vector is compared only with vectors of this name."""

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """One vector per text, shape ``(len(texts), dimension)``."""


@dataclass(frozen=True)
class EmbeddingConfig:
    """Where and how to reach an OpenAI-compatible embeddings endpoint. ``base_url`` ends before ``/embeddings``."""

    base_url: str
    #: The model that embeds memories; stored beside every vector, and what a query's vector is compared within.
    model: str
    api_key: str | None = None
    timeout: float = 30.0
    #: Put before every query (e5-style models: ``"query: "``).
    query_prefix: str = ""
    #: Put before every memory's text when it is embedded (e5-style models: ``"passage: "``).
    document_prefix: str = ""
    #: Another model for queries, whose vectors live in the same space as ``model``'s; None: ``model``.
    query_model: str | None = None

    def __post_init__(self) -> None:
        check_endpoint(self.base_url, self.model, self.timeout, what="embedding", error=EmbeddingError)
        if self.query_model is not None and not self.query_model.strip():
            raise EmbeddingError("embedding query model name is empty (leave it unset to use the document model)")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> EmbeddingConfig | None:
        """The configuration from ``MEMLENS_EMBED_*`` variables, or None when no endpoint is configured; a half or
        malformed configuration raises ``EmbeddingError``."""
        found = endpoint_from_env(os.environ if environ is None else environ, "MEMLENS_EMBED", what="the embeddings endpoint", error=EmbeddingError)
        if found is None:
            return None
        base_url, model, api_key, timeout = found
        env = os.environ if environ is None else environ
        # Prefixes are taken verbatim: the space after "query:" is part of what the model was trained on.
        return cls(
            base_url=base_url,
            model=model,
            api_key=api_key,
            timeout=timeout,
            query_prefix=env.get("MEMLENS_EMBED_QUERY_PREFIX", ""),
            document_prefix=env.get("MEMLENS_EMBED_DOCUMENT_PREFIX", ""),
            query_model=env.get("MEMLENS_EMBED_QUERY_MODEL", "").strip() or None,
        )


class EmbeddingClient:
    """A minimal client for ``POST {base_url}/embeddings`` returning float32 vectors."""

    def __init__(self, config: EmbeddingConfig, *, batch: int = EMBED_BATCH) -> None:
        if not isinstance(batch, int) or isinstance(batch, bool) or batch < 1:
            raise EmbeddingError(f"embedding batch size must be a positive whole number, got {batch!r}")
        self.config = config
        self.batch = batch
        self.url = config.base_url.rstrip("/") + "/embeddings"
        self._endpoint = JsonEndpoint(self.url, api_key=config.api_key, timeout=config.timeout, what="embedding endpoint", error=EmbeddingError)

    @property
    def model(self) -> str:
        """The model name sent with every request (and stored beside every vector)."""
        return self.config.model

    def embed_documents(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Vectors for memories' texts, as :meth:`embed` gives them, each text after the configured document prefix."""
        return self.embed(texts, prefix=self.config.document_prefix)

    def embed_query(self, query: str) -> npt.NDArray[np.float32]:
        """The vector of one search query, shape ``(1, dimension)``: the query prefix before it, sent to the query
        model when one is configured (else :attr:`model`). Errors as :meth:`embed`."""
        return self.embed([query], prefix=self.config.query_prefix, model=self.config.query_model)

    def embed(self, texts: Sequence[str], *, prefix: str = "", model: str | None = None) -> npt.NDArray[np.float32]:
        """One vector per text, in order, as a float32 array of shape ``(len(texts), dimension)``, each text sent
        as ``prefix + text`` to ``model`` (default :attr:`model`).

        Texts are sent ``batch`` at a time, each cut to 8,000 characters. Raises ``EmbeddingError`` on timeout,
        unreachable endpoint, HTTP error status, or an answer that is not one finite number list per text, all of
        one dimension. No texts means no request and an array of shape ``(0, 0)``.
        """
        import numpy as np

        if isinstance(texts, str):
            raise EmbeddingError("embed() takes a list of texts, not one string")
        inputs = [(prefix + (t if isinstance(t, str) else str(t)))[:MAX_INPUT_CHARS] or " " for t in texts]
        if not inputs:
            return np.zeros((0, 0), dtype=np.float32)
        parts: list[npt.NDArray[np.float32]] = []
        dim: int | None = None
        for start in range(0, len(inputs), self.batch):
            chunk = inputs[start : start + self.batch]
            vectors = self._embed_batch(chunk, model or self.config.model)
            if dim is None:
                dim = vectors.shape[1]
            elif vectors.shape[1] != dim:
                raise EmbeddingError(f"embedding answer rejected: dimension changed from {dim} to {vectors.shape[1]} between batches")
            parts.append(vectors)
        return np.vstack(parts) if len(parts) > 1 else parts[0]

    def _embed_batch(self, texts: list[str], model: str) -> npt.NDArray[np.float32]:
        answer = self._endpoint.post({"model": model, "input": texts})
        return parse_embeddings(answer, len(texts))


def parse_embeddings(answer: Any, expected: int) -> npt.NDArray[np.float32]:
    """The vectors of an OpenAI-style embeddings answer (``{"data": [{"embedding": [...], "index": i}, ...]}``)
    as a float32 array of shape ``(expected, dimension)``, ordered by ``index`` when the items carry one.

    Raises ``EmbeddingError`` naming the first problem: wrong shape, a count other than ``expected``, a value that
    is not a finite number, an empty vector, or vectors of different dimensions.
    """
    import numpy as np

    data = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(data, list):
        raise EmbeddingError(f"embedding answer has the wrong shape (no data list): {snippet(answer)}")
    if len(data) != expected:
        raise EmbeddingError(f"embedding answer rejected: {len(data)} vectors for {expected} texts")
    slots: list[list[float] | None] = [None] * expected
    dim: int | None = None
    for position, item in enumerate(data):
        where = f"data[{position}]"
        if not isinstance(item, dict) or not isinstance(item.get("embedding"), list):
            raise EmbeddingError(f"embedding answer rejected: {where} has no embedding list")
        index = item.get("index", position)
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < expected or slots[index] is not None:
            raise EmbeddingError(f"embedding answer rejected: {where}.index {index!r} is not a distinct position below {expected}")
        vector = item["embedding"]
        for i, value in enumerate(vector):
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
                raise EmbeddingError(f"embedding answer rejected: {where}.embedding[{i}] is not a finite number ({value!r})")
        if not vector:
            raise EmbeddingError(f"embedding answer rejected: {where}.embedding is empty")
        if dim is None:
            dim = len(vector)
        elif len(vector) != dim:
            raise EmbeddingError(f"embedding answer rejected: {where}.embedding has {len(vector)} dimensions, the first had {dim}")
        slots[index] = vector
    return np.asarray(slots, dtype=np.float32).reshape(expected, dim or 0)


def vector_to_blob(vector: npt.NDArray[Any]) -> bytes:
    """One vector as the bytes stored in ``memory_vectors.vector``: float32, little-endian."""
    import numpy as np

    return np.ascontiguousarray(vector, dtype="<f4").tobytes()


def blobs_to_matrix(blobs: Sequence[bytes], dim: int) -> npt.NDArray[np.float32]:
    """Stored vectors (each ``dim`` float32 little-endian values) as a float32 array of shape ``(len(blobs), dim)``."""
    import numpy as np

    if not blobs:
        return np.zeros((0, dim), dtype=np.float32)
    return np.frombuffer(b"".join(blobs), dtype="<f4").reshape(len(blobs), dim).astype(np.float32)
