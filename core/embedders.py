"""Which embedder the environment asks for: an OpenAI-compatible endpoint (:mod:`memlens.embeddings`) or the
optional in-process model (:mod:`memlens.local_embeddings`).

The choice lives here, above both, so that neither of them imports the other: the endpoint client knows nothing of
the local model, and the local model borrows only the endpoint module's error type and input limit.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from memlens.embeddings import Embedder, EmbeddingClient, EmbeddingConfig, EmbeddingError

#: ``MEMLENS_EMBED_PROVIDER`` values: an OpenAI-compatible endpoint (the default) or the optional local model.
PROVIDERS = ("endpoint", "local")


def provider_from_env(environ: Mapping[str, str] | None = None) -> str:
    """``MEMLENS_EMBED_PROVIDER``, normalised (``endpoint`` when unset). Raises ``EmbeddingError`` for an unknown one."""
    env = os.environ if environ is None else environ
    provider = env.get("MEMLENS_EMBED_PROVIDER", "").strip().lower() or "endpoint"
    if provider not in PROVIDERS:
        raise EmbeddingError(f"MEMLENS_EMBED_PROVIDER must be one of {', '.join(PROVIDERS)}, not {provider!r}")
    return provider


def embedder_from_env(environ: Mapping[str, str] | None = None) -> Embedder | None:
    """The embedder the environment configures: the local model when ``MEMLENS_EMBED_PROVIDER=local``, else the
    endpoint of the ``MEMLENS_EMBED_*`` variables, else None. Raises ``EmbeddingError`` for an unknown provider, a
    malformed endpoint configuration, or ``local`` without the extra installed (``LocalModelMissing``)."""
    env = os.environ if environ is None else environ
    if provider_from_env(env) == "local":
        from memlens.local_embeddings import LocalEmbedder

        return LocalEmbedder()
    config = EmbeddingConfig.from_env(env)
    return EmbeddingClient(config) if config is not None else None
