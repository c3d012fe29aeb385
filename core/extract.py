"""Deterministic knowledge extraction: recurring facts from episodes, recurring workflows from sessions.

Both functions are pure: they read ``Memory`` objects and return drafts, writing nothing. Text similarity is a
small TF-IDF (sublinear term frequency, smoothed idf, l2-normalised rows) over numpy; it is built per call, so
results depend only on the input, never on what else is in the store.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from memlens.episodes import STRUCTURAL_LABELS, ObservationView, clip_text, read_observation, step_name
from memlens.models import Memory
from memlens.text import STOPWORDS, default_title, similarity_tokens

#: The knowledge types a fact draft can carry.
FACT_TYPES: tuple[str, ...] = ("fact", "preference", "decision", "pattern")

_TOKEN = re.compile(r"\w+(?:[.'/-]\w+)*")
_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(`])")
_BULLET = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)])\s+")

# Cue words, checked in this order: the first type whose cue matches wins, "fact" otherwise.
_TYPE_CUES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "preference",
        re.compile(
            r"\b(?:prefer(?:s|red)?|preference|likes?|dislikes?|favou?rite|rather than|always use|never use|"
            r"wants?|would rather)\b",
            re.IGNORECASE,
        ),
    ),
    (
        "decision",
        re.compile(
            r"\b(?:decid(?:e|ed|es)|decision|chose|choose|chosen|will use|switch(?:ed)? to|opted for|"
            r"settled on|going with|agreed to)\b",
            re.IGNORECASE,
        ),
    ),
    (
        "pattern",
        re.compile(
            r"\b(?:usually|often|always|whenever|every time|each time|tends? to|typically|keeps?|repeatedly|"
            r"again)\b",
            re.IGNORECASE,
        ),
    ),
)

_MIN_SENTENCE_TOKENS = 3
_MAX_SENTENCE_CHARS = 400
_MAX_TITLE = 80
_MAX_TRIGGER = 200
_FACT_TAGS = 3

FloatMatrix = npt.NDArray[np.float32]


@dataclass(frozen=True)
class FactDraft:
    """A proposed semantic memory: a statement that recurs across episodes.

    ``type`` is one of ``FACT_TYPES``; ``source_ids`` are the ids of the supporting episodes; ``support`` is how many
    distinct episodes state it; ``confidence`` is in [0, 1].
    """

    title: str
    content: str
    type: str
    tags: tuple[str, ...]
    source_ids: tuple[int, ...]
    support: int
    confidence: float


@dataclass(frozen=True)
class WorkflowDraft:
    """A proposed procedural memory: an ordered sequence of steps seen in several sessions.

    ``content`` is the trigger followed by numbered steps; ``source_ids`` are the ids of the memories the workflow
    was learned from (observations for ``recurring_workflows``, episodes for ``llm_extract``); ``support`` is the
    number of sessions or episodes it was seen in.
    """

    title: str
    content: str
    steps: tuple[str, ...]
    trigger: str
    source_ids: tuple[int, ...]
    support: int


def recurring_facts(episodes: Sequence[Memory], *, min_episodes: int = 2, similarity: float = 0.5) -> list[FactDraft]:
    """Statements made in at least ``min_episodes`` distinct episodes, one draft per group of similar sentences.

    Episode contents are split into sentences (structural summary lines such as "Tools: ..." and sentences of fewer
    than three content words are ignored); sentences whose TF-IDF cosine similarity to a group's centroid is at least
    ``similarity`` join that group. Each draft's content is the group's most central sentence; its type comes from
    cue words. Drafts are ordered by support, then confidence, then first appearance. Time and memory grow with
    sentences x vocabulary (dense float32 matrices: about 4 s and 250 MB for 1,000 ten-sentence episodes), so call
    it on a batch of episodes rather than on a whole store.
    """
    if min_episodes < 1:
        raise ValueError("min_episodes must be at least 1")
    if not 0.0 < similarity <= 1.0:
        raise ValueError("similarity must be in (0, 1]")
    sentences: list[str] = []
    owners: list[int] = []
    token_lists: list[list[str]] = []
    for index, episode in enumerate(episodes):
        for sentence in candidate_sentences(episode):
            tokens = tokenize(sentence)
            if len(tokens) >= _MIN_SENTENCE_TOKENS:
                sentences.append(sentence)
                owners.append(index)
                token_lists.append(tokens)
    if not sentences:
        return []

    vectors, vocabulary = tfidf_matrix(token_lists)
    drafts: list[tuple[int, FactDraft]] = []
    for members in _leader_clusters(vectors, similarity):
        episode_indexes = sorted({owners[m] for m in members})
        if len(episode_indexes) < min_episodes:
            continue
        centroid = _unit(vectors[members].sum(axis=0))
        closeness = vectors[members] @ centroid
        central = members[int(np.argmax(closeness))]
        support = len(episode_indexes)
        cohesion = float(closeness.mean())
        text = sentences[central]
        top_terms = np.argsort(-centroid, kind="stable")[:_FACT_TAGS]
        draft = FactDraft(
            title=default_title(text),
            content=text,
            type=classify_fact(text),
            tags=tuple(vocabulary[t] for t in top_terms if centroid[t] > 0),
            source_ids=tuple(episodes[i].id for i in episode_indexes),
            support=support,
            # Bounded by how alike the sentences are, and rising towards that bound as more episodes agree.
            confidence=round(min(1.0, cohesion) * support / (support + 1), 3),
        )
        drafts.append((members[0], draft))
    drafts.sort(key=lambda item: (-item[1].support, -item[1].confidence, item[0]))
    return [draft for _, draft in drafts]


def recurring_workflows(
    sessions: Sequence[Sequence[Memory]], *, min_sessions: int = 2, min_length: int = 2, max_length: int = 6
) -> list[WorkflowDraft]:
    """Ordered tool-call sequences that occur, contiguously, in at least ``min_sessions`` sessions.

    Each session's tool calls are taken in time order and normalised to steps ("Read", "Edit", "Bash: pytest");
    consecutive repeats of one step count once, so three reads in a row match a single "Read". Sequences of
    ``min_length`` to ``max_length`` steps are counted once per session; a sequence contained in a longer one with the
    same support is dropped. The trigger is the most typical of the prompts that preceded the occurrences (or the
    session's first observation when no prompt did). ``source_ids`` are the observations of the first occurrence in
    each supporting session. Drafts are ordered by support, then length, then first appearance.
    """
    if min_sessions < 1:
        raise ValueError("min_sessions must be at least 1")
    if not 1 <= min_length <= max_length:
        raise ValueError("need 1 <= min_length <= max_length")
    session_views = [[read_observation(m) for m in sorted(obs, key=lambda m: (m.created_at, m.id))] for obs in sessions]
    session_steps = [_collapsed_steps(views) for views in session_views]

    occurrences: dict[tuple[str, ...], list[tuple[int, int]]] = {}
    for s, steps in enumerate(session_steps):
        names = [step.name for step in steps]
        seen: set[tuple[str, ...]] = set()
        for length in range(min_length, max_length + 1):
            for start in range(len(names) - length + 1):
                gram = tuple(names[start : start + length])
                if gram not in seen:
                    seen.add(gram)
                    occurrences.setdefault(gram, []).append((s, start))

    frequent = {gram: occ for gram, occ in occurrences.items() if len(occ) >= min_sessions}
    # A sequence inside a longer one with the same support is inside a one-step-longer one with that support too,
    # so looking at each sequence's prefix and suffix is enough to find every non-maximal one.
    covered = {
        part
        for gram, occ in frequent.items()
        if len(gram) > min_length
        for part in (gram[:-1], gram[1:])
        if len(frequent[part]) == len(occ)
    }
    maximal = [gram for gram in frequent if gram not in covered]
    maximal.sort(key=lambda gram: (-len(frequent[gram]), -len(gram), frequent[gram][0]))

    drafts: list[WorkflowDraft] = []
    for gram in maximal:
        occ = frequent[gram]
        triggers = [_preceding_prompt(session_views[s], session_steps[s][start].first_index) for s, start in occ]
        trigger = clip_text(_most_typical([t for t in triggers if t]), _MAX_TRIGGER)
        source_ids = tuple(
            memory_id
            for s, start in occ
            for step in session_steps[s][start : start + len(gram)]
            for memory_id in step.ids
        )
        numbered = [f"{i}. {name}" for i, name in enumerate(gram, start=1)]
        content_lines = ([f"When: {trigger}"] if trigger else []) + numbered + [f"Seen in {len(occ)} sessions."]
        drafts.append(
            WorkflowDraft(
                title=clip_text(" -> ".join(gram), _MAX_TITLE),
                content="\n".join(content_lines),
                steps=gram,
                trigger=trigger,
                source_ids=source_ids,
                support=len(occ),
            )
        )
    return drafts


def classify_fact(text: str) -> str:
    """The fact type a sentence's cue words suggest: preference, decision, pattern, or fact when none matches."""
    for fact_type, cue in _TYPE_CUES:
        if cue.search(text):
            return fact_type
    return "fact"


def candidate_sentences(episode: Memory) -> list[str]:
    """The sentences of an episode worth comparing across episodes, in order, bullets and summary labels removed."""
    sentences: list[str] = []
    for raw_line in (episode.content or "").splitlines():
        line = raw_line.strip()
        if not line or line.startswith(STRUCTURAL_LABELS) or line.endswith(":"):
            continue
        line = _BULLET.sub("", line)
        sentences += [s.strip() for s in _SENTENCE_SPLIT.split(line) if s.strip()]
    return [s[:_MAX_SENTENCE_CHARS] for s in sentences]


def tokenize(text: str) -> list[str]:
    """Lower-cased content words of ``text`` in order: stop words and one-letter words dropped, a plural "s"
    stripped, and non-ASCII words (CJK runs as bigrams) tokenised as ``memlens.text.similarity_tokens`` does."""
    tokens: list[str] = []
    for token in _TOKEN.findall(text.lower()):
        if not token.isascii():
            # Scripts without spaces (Chinese, Japanese, Korean) become bigrams the way the supersede check sees them.
            tokens += sorted(similarity_tokens(token))
            continue
        if len(token) < 2 or token in STOPWORDS:
            continue
        # A crude plural fold so that "tests" meets "test" and "queries" meets "query"; "class", "status" and
        # "analysis" keep their "s".
        if len(token) > 4 and token.endswith("ies"):
            token = token[:-3] + "y"
        elif len(token) > 4 and token.endswith("s") and not token.endswith(("ss", "us", "is")):
            token = token[:-1]
        tokens.append(token)
    return tokens


def tfidf_matrix(token_lists: Sequence[Sequence[str]]) -> tuple[FloatMatrix, list[str]]:
    """One l2-normalised TF-IDF row per token list (sublinear tf, smoothed idf) and the vocabulary of its columns.

    A row with no tokens is all zeros.
    """
    vocabulary: dict[str, int] = {}
    for tokens in token_lists:
        for token in tokens:
            vocabulary.setdefault(token, len(vocabulary))
    matrix = np.zeros((len(token_lists), len(vocabulary)), dtype=np.float32)
    for row, tokens in enumerate(token_lists):
        for token, count in Counter(tokens).items():
            matrix[row, vocabulary[token]] = 1.0 + math.log(count)
    document_frequency = (matrix > 0).sum(axis=0)
    idf = np.log((1.0 + len(token_lists)) / (1.0 + document_frequency)) + 1.0
    matrix *= idf.astype(np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return matrix / norms, list(vocabulary)


@dataclass(frozen=True)
class _Step:
    name: str
    first_index: int  # index in the session's views of the run's first observation
    ids: tuple[int, ...]  # memory ids of the whole run


def _collapsed_steps(views: list[ObservationView]) -> list[_Step]:
    steps: list[_Step] = []
    for index, view in enumerate(views):
        name = step_name(view)
        if name is None:
            continue
        if steps and steps[-1].name == name:
            steps[-1] = _Step(name, steps[-1].first_index, (*steps[-1].ids, view.memory_id))
        else:
            steps.append(_Step(name, index, (view.memory_id,)))
    return steps


def _leader_clusters(vectors: FloatMatrix, threshold: float) -> list[list[int]]:
    """Greedy single-pass clustering: each row joins the most similar centroid at or above ``threshold``."""
    sums = np.zeros_like(vectors)  # row k: sum of cluster k's members; its direction is the centroid's
    norms = np.zeros(vectors.shape[0], dtype=vectors.dtype)
    clusters: list[list[int]] = []
    for row, vector in enumerate(vectors):
        # A sentence has a handful of terms, so the dot products only need those columns.
        terms = np.flatnonzero(vector)
        if clusters and terms.size:
            similarities = (sums[: len(clusters), terms] @ vector[terms]) / norms[: len(clusters)]
            best = int(np.argmax(similarities))
            if similarities[best] >= threshold:
                clusters[best].append(row)
                sums[best] += vector
                norms[best] = np.linalg.norm(sums[best])
                continue
        sums[len(clusters)] = vector
        norms[len(clusters)] = np.linalg.norm(vector) or 1.0
        clusters.append([row])
    return clusters


def _preceding_prompt(views: list[ObservationView], index: int) -> str:
    for view in reversed(views[:index]):
        if view.kind == "prompt" and view.text:
            return view.text
    return views[0].text if views else ""


def _most_typical(texts: list[str]) -> str:
    """The text most similar to all the others (identical texts reinforce each other); the first wins ties."""
    if not texts:
        return ""
    vectors, vocabulary = tfidf_matrix([tokenize(t) for t in texts])
    if not vocabulary:
        return Counter(texts).most_common(1)[0][0]
    scores = (vectors @ vectors.T).sum(axis=1)
    return texts[int(np.argmax(scores))]


def _unit(vector: FloatMatrix) -> FloatMatrix:
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm > 0 else vector
