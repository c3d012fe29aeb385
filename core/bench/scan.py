"""An exact, vectorised full scan for supersede decisions: the oracle for the agreement check at scale.

:func:`memlens.supersede.brute_force_best` reads every latest memory for every call, seconds each at a million, so
checking 1,000 decisions with it would take hours. This scan reads every latest memory of the knowledge layers
*once*, keeps their token sets as integer postings, and then computes the Jaccard similarity of a probe with
every one of them with numpy. Its answers are checked against ``brute_force_best`` itself on the probes the
benchmark times that function on.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from memlens.db import Connection
from memlens.supersede import SUPERSEDING_LAYERS
from memlens.text import similarity_tokens


class ExactScan:
    """Every latest knowledge-layer memory of a store, ready to score probes against all of them."""

    def __init__(self, conn: Connection) -> None:
        ids: list[int] = []
        layers: list[int] = []
        projects: list[int] = []
        expiry: list[float] = []
        sizes: list[int] = []
        vocab: dict[str, int] = {}
        rows_of: list[list[int]] = []
        self._project_codes: dict[str | None, int] = {None: 0}
        marks = ",".join("?" * len(SUPERSEDING_LAYERS))
        for mid, layer, project, forget_after, content in conn.execute(
            f"SELECT id, layer, project, forget_after, content FROM memories WHERE is_latest = 1 AND layer IN ({marks}) ORDER BY id",
            SUPERSEDING_LAYERS,
        ):
            tokens = similarity_tokens(content)
            row = len(ids)
            ids.append(mid)
            layers.append(SUPERSEDING_LAYERS.index(layer))
            projects.append(self._project_codes.setdefault(project, len(self._project_codes)))
            expiry.append(np.inf if forget_after is None else forget_after)
            sizes.append(len(tokens))
            for tok in tokens:
                tid = vocab.get(tok)
                if tid is None:
                    tid = vocab[tok] = len(vocab)
                    rows_of.append([])
                rows_of[tid].append(row)
        self.ids = np.array(ids, dtype=np.int64)
        self.layers = np.array(layers, dtype=np.int8)
        self.projects = np.array(projects, dtype=np.int32)
        self.expiry = np.array(expiry, dtype=np.float64)
        self.sizes = np.array(sizes, dtype=np.int64)
        self.vocab = vocab
        self.postings = [np.array(r, dtype=np.int64) for r in rows_of]

    def __len__(self) -> int:
        return len(self.ids)

    def best(self, tokens: Iterable[str], *, layer: str, project: str | None, probe_threshold: float, now: float) -> tuple[int, float] | None:
        """(memory id, similarity) of the most similar latest memory above the threshold, ties to the newest,
        by the same rule as :func:`memlens.supersede.brute_force_best`; None when nothing passes."""
        toks = frozenset(tokens)
        if layer not in SUPERSEDING_LAYERS or not toks or not len(self.ids):
            return None
        lists = [self.postings[self.vocab[t]] for t in toks if t in self.vocab]
        if not lists:
            return None
        inter = np.bincount(np.concatenate(lists), minlength=len(self.ids)).astype(np.int64)
        union = len(toks) + self.sizes - inter
        with np.errstate(divide="ignore", invalid="ignore"):
            sim = np.where(union > 0, inter / np.maximum(union, 1), 0.0)
        mask = (inter > 0) & (self.layers == SUPERSEDING_LAYERS.index(layer)) & (self.expiry > now) & (sim > probe_threshold)
        if project is not None:
            code = self._project_codes.get(project, -1)
            mask &= (self.projects == 0) | (self.projects == code)
        rows = np.nonzero(mask)[0]
        if not len(rows):
            return None
        top = sim[rows].max()
        winners = rows[sim[rows] == top]
        winner = int(winners[np.argmax(self.ids[winners])])
        return int(self.ids[winner]), float(sim[winner])
