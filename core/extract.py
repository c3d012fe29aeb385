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

from memlens.episodes import SHELL_TOOLS, STRUCTURAL_LABELS, ObservationView, clip_text, error_line, read_observation, step_name
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



# --- what the deterministic consolidation promotes -----------------------------------------------------------------
#
# Only what the observations themselves justify: a sentence in which someone *states* a preference, a decision or a
# durable fact (quoted verbatim, never rephrased); a command sequence that recurs and whose commands passed; a
# failure that recurs (a lesson when the command passed again later in the session, a bug when it never did).
# Requests, chit-chat, speaker turns and tool output are never knowledge.

#: Cue patterns of stated knowledge, checked in this order; a sentence that matches none is not promoted.
_STATED_CUES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "decision",
        re.compile(
            r"\b(?:we|i)(?:'ve| have)? (?:decided|chose|agreed|settled on|opted for|switched to)\b"
            r"|\b(?:we|i)(?:'ll| will) (?:use|go with|switch to|stick with|keep using)\b"
            r"|\blet's (?:use|go with|switch to|stick with|keep using)\b|\bdecision:",
            re.IGNORECASE,
        ),
    ),
    (
        "preference",
        re.compile(
            r"\bi (?:really |strongly )?(?:prefer|would rather|don't like|do not like|dislike|can't stand)\b|\bi'd rather\b"
            r"|^(?:please )?(?:always|never|don't ever) (?:use|run|add|write|commit|push|put|call|format|keep|reply|answer|include)\b"
            r"|\bmy (?:favou?rite|preferred) [\w -]{1,40}? (?:is|are)\b|\b(?:is|are) my (?:favou?rite|preferred)\b"
            # A liking of something general ("I love painting"), not of the thing just shown ("I love the colours").
            r"|\bi (?:really )?(?:like|love|enjoy) (?!it\b|that\b|this\b|you\b|them\b|(?:all )?the\b|to hear\b|how\b|your\b)\w",
            re.IGNORECASE,
        ),
    ),
    (
        "fact",
        re.compile(
            r"\b(?:i|we) (?:work (?:as|at|for|on)|live in|grew up in|was born|am from|moved to|studied)\b"
            r"|\bwe (?:use|run|deploy|host) \w"
            r"|\b(?:our|the|this) (?:\w+ )?(?:project|repo|repository|api|service|server|database|app|build|ci|cluster)"
            r" (?:\w+ ){0,2}(?:is|are|uses|runs|lives|requires|needs|listens|deploys)\b",
            re.IGNORECASE,
        ),
    ),
)
#: Greetings, thanks and reactions: a sentence with one of these is conversation, not knowledge.
_CHITCHAT = re.compile(
    r"\b(?:hi|hey|hello|thanks|thank you|bye|congrat\w*|wow|lol|haha\w*|awesome|amazing|glad|sorry|excited|"
    r"so happy|sounds (?:great|good|fun)|take care|see you|good luck|proud|wonderful|fantastic|lovely|cool)\b",
    re.IGNORECASE,
)
#: A sentence about "it", "that" or "this" depends on what came before it: quoting it alone would mislead.
_CONTEXT_SUBJECT = re.compile(r"^[\"'(]*(?:it|it's|that|that's|this|these|those|here's|there's)\b|\blike (?:this|that)\b", re.IGNORECASE)
_SPEAKER = re.compile(r"^([A-Z][\w .'-]{0,40}):\s+(?=\S)")
_MIN_STATED_TOKENS = 3
_STATEMENT_SIMILARITY = 0.6


@dataclass(frozen=True)
class LessonDraft:
    """A recurring failure of one command: a ``lesson`` (procedural) when the command passed again later in a
    session, a ``bug`` (semantic) when it never did. ``source_ids`` are the failing calls, the calls between a
    failure and the passing run, and that run."""

    title: str
    content: str
    type: str
    step: str
    error: str
    source_ids: tuple[int, ...]
    support: int
    resolved: int


def stated_facts(sessions: Sequence[Sequence[Memory]]) -> list[FactDraft]:
    """Sentences in which a person or agent states a preference, decision or durable fact, one draft per group of
    alike sentences across ``sessions``, quoted as first said (with the speaker, for chat turns).

    Read: user prompts, notes and chat turns, and the ``description`` an agent gives a tool call; never tool output.
    Questions, greetings and reactions are skipped. ``source_ids`` are the observations stating it; ``support`` is
    the number of sessions that do.
    """
    statements: list[tuple[str, str, int, int]] = []  # (sentence, type, memory id, session index)
    for index, session in enumerate(sessions):
        for memory in sorted(session, key=lambda m: (m.created_at, m.id)):
            for sentence, kind in _statements(read_observation(memory)):
                statements.append((sentence, kind, memory.id, index))
    if not statements:
        return []
    vectors, vocabulary = tfidf_matrix([tokenize(_SPEAKER.sub("", s[0])) for s in statements])
    drafts: list[FactDraft] = []
    for members in _leader_clusters(vectors, _STATEMENT_SIMILARITY):
        first = statements[members[0]]
        kinds = Counter(statements[m][1] for m in members)
        support = len({statements[m][3] for m in members})
        centroid = _unit(vectors[members].sum(axis=0))
        top_terms = np.argsort(-centroid, kind="stable")[:_FACT_TAGS]
        drafts.append(
            FactDraft(
                title=default_title(first[0]),
                content=first[0],
                type=kinds.most_common(1)[0][0],
                tags=tuple(vocabulary[t] for t in top_terms if centroid[t] > 0),
                source_ids=tuple(dict.fromkeys(statements[m][2] for m in members)),
                support=support,
                # An explicit statement is good evidence; each further session that repeats it adds a little.
                confidence=round(min(1.0, 0.6 + 0.1 * support), 3),
            )
        )
    drafts.sort(key=lambda d: -d.support)
    return drafts


def _statements(view: ObservationView) -> list[tuple[str, str]]:
    if view.kind == "tool":
        description = view.tool_input.get("description")
        text = description if isinstance(description, str) else ""
    else:
        text = view.text
    speaker_match = _SPEAKER.match(text)
    speaker = speaker_match.group(1) if speaker_match else None
    body = text[speaker_match.end() :] if speaker_match else text
    out = []
    for raw in _SENTENCE_SPLIT.split(" ".join(body.split())):
        sentence = raw.strip()
        if not sentence or sentence.endswith("?") or _CHITCHAT.search(sentence) or _CONTEXT_SUBJECT.search(sentence):
            continue
        if len(sentence) > _MAX_SENTENCE_CHARS:
            continue
        if len(tokenize(sentence)) < _MIN_STATED_TOKENS:
            continue
        kind = next((k for k, cue in _STATED_CUES if cue.search(sentence)), None)
        if kind is not None:
            out.append((f"{speaker}: {sentence}" if speaker else sentence, kind))
    return out


def command_workflows(
    sessions: Sequence[Sequence[Memory]], *, min_sessions: int = 3, min_length: int = 2, max_length: int = 6
) -> list[WorkflowDraft]:
    """Recurring tool-call sequences (:func:`recurring_workflows`) that run a shell command, end with one, and whose
    commands passed in at least ``min_sessions`` of the sessions they occur in. The content lists the steps with an
    example command line and says how often the commands passed; ``support`` counts the passing sessions."""
    ordered = [sorted(s, key=lambda m: (m.created_at, m.id)) for s in sessions]
    views = [[read_observation(m) for m in s] for s in ordered]
    steps = [_collapsed_steps(v) for v in views]
    by_id = {view.memory_id: view for session in views for view in session}
    drafts: list[WorkflowDraft] = []
    candidates = recurring_workflows(ordered, min_sessions=min_sessions, min_length=min_length, max_length=max_length)
    for draft in candidates:
        if not _is_command(draft.steps[-1]):
            continue  # a sequence that ends before its command has no outcome to show
        passed: list[tuple[int, ...]] = []
        failed = 0
        for session_steps in steps:
            names = [step.name for step in session_steps]
            for start in range(len(names) - len(draft.steps) + 1):
                if tuple(names[start : start + len(draft.steps)]) == draft.steps:
                    run = session_steps[start : start + len(draft.steps)]
                    # A step's outcome is its last call's: "pytest" failing then passing in a row passed.
                    ok = all(error_line(by_id[step.ids[-1]]) is None for step in run if _is_command(step.name))
                    if ok:
                        passed.append(tuple(i for step in run for i in step.ids))
                    else:
                        failed += 1
                    break
        if len(passed) < min_sessions:
            continue
        examples = _recurring_command_lines(steps, by_id)
        lines = [f"Steps seen in {len(passed) + failed} sessions; the commands passed in {len(passed)}:"]
        for number, name in enumerate(draft.steps, start=1):
            example = examples.get(name) if _is_command(name) else None
            lines.append(f"{number}. {name}" + (f" (e.g. `{example}`)" if example else ""))
        # The prompt before a routine is kept in the metadata, not stated as its trigger: the routine follows
        # whatever was asked ("Fix the login", "thanks!"), and claiming one cause would be invented.
        drafts.append(
            WorkflowDraft(
                title=draft.title,
                content="\n".join(lines),
                steps=draft.steps,
                trigger=draft.trigger,
                source_ids=tuple(i for ids in passed for i in ids),
                support=len(passed),
            )
        )
    # One workflow per routine: a sequence inside a longer one that also passed is that routine seen in part.
    return [
        d for d in drafts
        if not any(len(o.steps) > len(d.steps) and o.support >= d.support and _contains(o.steps, d.steps) for o in drafts)
    ]  # fmt: skip


def _contains(longer: tuple[str, ...], shorter: tuple[str, ...]) -> bool:
    return any(longer[i : i + len(shorter)] == shorter for i in range(len(longer) - len(shorter) + 1))


def failure_lessons(sessions: Sequence[Sequence[Memory]], *, min_sessions: int = 2) -> list[LessonDraft]:
    """Command failures with the same step and error in at least ``min_sessions`` sessions: a lesson when in at
    least one of them the same step passed later, saying what was done in between; a bug otherwise."""
    groups: dict[tuple[str, str], list[tuple[int, tuple[int, ...], bool, list[str]]]] = {}
    errors: dict[tuple[str, str], str] = {}  # the first wording of each failure
    for index, session in enumerate(sessions):
        views = [read_observation(m) for m in sorted(session, key=lambda m: (m.created_at, m.id))]
        seen: set[tuple[str, str]] = set()
        for position, view in enumerate(views):
            name = step_name(view)
            found = error_line(view)
            if name is None or found is None or not _is_command(name):
                continue
            error = found[len(name) + 2 :] if found.startswith(f"{name}: ") else found
            key = (name, re.sub(r"\d+(?:\.\d+)?", "#", error))
            if key in seen:
                continue
            seen.add(key)
            errors.setdefault(key, error)
            ids, fixed, between = [view.memory_id], False, []
            for later in views[position + 1 :]:
                if step_name(later) == name:
                    if error_line(later) is None:
                        ids.append(later.memory_id)
                        fixed = True
                    break
                ids.append(later.memory_id)
                if later.kind == "tool" and later.tool and later.tool.lower() not in SHELL_TOOLS:
                    between.append(later.tool + (f" {p}" if (p := _first_path(later)) else ""))
            groups.setdefault(key, []).append((index, tuple(ids) if fixed else (view.memory_id,), fixed, between))
    drafts = []
    for (name, signature), occurrences in groups.items():
        if len({o[0] for o in occurrences}) < min_sessions:
            continue
        error = errors[(name, signature)]
        resolved = [o for o in occurrences if o[2]]
        support = len(occurrences)
        if resolved:
            fixes = _unique_texts([step for o in resolved for step in o[3]])[:4]
            content = (
                f"{name} failed with: {error}\nIt failed in {support} sessions and passed again later in {len(resolved)}"
                + (f", after: {', '.join(fixes)}." if fixes else ".")
            )
            title, kind = f"Lesson: {name} fails with {error}", "lesson"
        else:
            content = f"{name} failed with: {error}\nIt failed in {support} sessions and was not seen passing after it in any of them."
            title, kind = f"Bug: {name} fails with {error}", "bug"
        drafts.append(
            LessonDraft(
                title=clip_text(title, _MAX_TITLE), content=content, type=kind, step=name, error=error,
                source_ids=tuple(i for o in occurrences for i in o[1]), support=support, resolved=len(resolved),
            )
        )
    drafts.sort(key=lambda d: -d.support)
    return drafts


def _is_command(step: str) -> bool:
    tool, _, verb = step.partition(": ")
    return bool(verb) and tool.lower() in SHELL_TOOLS


def _recurring_command_lines(steps: list[list[_Step]], by_id: dict[int, ObservationView]) -> dict[str, str]:
    """Per command step, the command line run in the most sessions when it recurs in two or more (a one-off line,
    such as a commit with its message, is no example of the routine and would make each run's text differ)."""
    sessions_of: dict[str, Counter[str]] = {}
    for session_steps in steps:
        # A quoted argument is a message or a name (git commit -m '...'): the routine is the command, not that.
        seen = {(step.name, line) for step in session_steps for i in step.ids if (line := _command_line(by_id[i])) and not re.search(r"['\"]", line)}
        for name, line in seen:
            sessions_of.setdefault(name, Counter())[line] += 1
    return {name: line for name, counts in sessions_of.items() for line, n in counts.most_common(1) if n >= 2}


def _command_line(view: ObservationView) -> str | None:
    command = view.tool_input.get("command") or view.tool_input.get("cmd")
    return clip_text(command, 80) if isinstance(command, str) and command.strip() else None


def _first_path(view: ObservationView) -> str | None:
    for key in ("file_path", "path", "notebook_path", "filePath", "filename", "target_file"):
        value = view.tool_input.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def _unique_texts(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))
