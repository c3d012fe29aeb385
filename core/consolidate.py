"""Consolidation: working observations -> episodes -> semantic facts and procedural workflows.

One run:

1. **Episodes.** Every session that has ended, or has been idle for more than :data:`IDLE_MINUTES` at ``now``, and
   holds observations not yet summarised, gets one episodic ``summary`` memory built from those observations
   (:func:`memlens.episodes.summarize_session`, or :func:`memlens.llm.llm_summarize_session` with an LLM). The session's
   metadata records ``episode_ids`` and ``summarized_through`` (the last observation id summarised), so a session
   that resumes later gets a further episode for its new observations only.
2. **Facts.** For each project with at least :data:`MIN_EPISODES` episodes whose latest :data:`LATEST_EPISODES`
   include one not yet mined, statements made in :data:`MIN_FACT_EPISODES` or more of those episodes become semantic
   memories (TF-IDF clustering, :func:`memlens.extract.recurring_facts`; or :func:`memlens.llm.llm_extract`).
3. **Workflows.** In the same pass, ordered tool-call sequences seen in :data:`MIN_WORKFLOW_SESSIONS` or more of
   those episodes' sessions become procedural memories with their trigger
   (:func:`memlens.extract.recurring_workflows`; or the LLM's workflows).

Every derived memory has origin ``consolidation`` and a ``derives`` relation to each of its sources. A derived
memory that matches a latest one (supersede rules: same layer, compatible project) is not duplicated: at or above
the store's ``duplicate_threshold`` it *reinforces* the existing memory (one recall, plus links to the new sources),
above ``supersede_threshold`` it becomes its next version; when every one of its sources already backs the match,
nothing changes, so running consolidation twice adds nothing.

Everything is computed first (including every LLM call); then one transaction writes it all, with one audit entry
(operation ``consolidate``) holding the counts. A timeout, an unreachable endpoint, a malformed answer or
``cancel()`` leaves the store exactly as it was, and the report says so.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from memlens import db, decay, supersede
from memlens.db import Connection
from memlens.episodes import EpisodeDraft, summarize_session
from memlens.extract import FactDraft, WorkflowDraft, recurring_facts, recurring_workflows
from memlens.llm import LLMClient, LLMConfig, LLMError, llm_extract, llm_summarize_session
from memlens.models import Memory
from memlens.redact import redact
from memlens.storage.validation import check_time
from memlens.text import similarity_tokens

if TYPE_CHECKING:
    from memlens.store import MemoryStore

#: A session with no event for this long counts as finished.
IDLE_MINUTES = 30
#: Facts and workflows are looked for once a project has this many episodes...
MIN_EPISODES = 5
#: ...among its latest this many.
LATEST_EPISODES = 20
#: A fact must be stated in at least this many episodes.
MIN_FACT_EPISODES = 2
#: A workflow must be seen in at least this many sessions, with at least this many steps.
MIN_WORKFLOW_SESSIONS = 3
MIN_WORKFLOW_STEPS = 3
#: At most this many workflows are taken from one pass (the most supported first).
MAX_WORKFLOWS = 10
#: Where consolidation remembers which episodes it has mined, per project (``meta`` table).
STATE_KEY = "consolidation_state"

Progress = Callable[[int, int, str], None]


@dataclass
class ConsolidationReport:
    """What a consolidation run did.

    ``method`` is ``"llm"`` or ``"deterministic"``; ``episodes`` the episode memories written; ``created`` the new
    facts and workflows (new versions included); ``superseded`` the memories those new versions replaced;
    ``reinforced`` the existing memories that a derived one matched. ``error`` is set (and nothing was written) when
    the LLM failed or answered badly; ``cancelled`` when ``cancel()`` stopped the run (nothing was written either).
    """

    method: str
    llm_configured: bool
    episodes: list[int] = field(default_factory=list)
    created: list[int] = field(default_factory=list)
    reinforced: list[int] = field(default_factory=list)
    superseded: list[int] = field(default_factory=list)
    message: str = ""
    cancelled: bool = False
    error: str | None = None
    sessions: list[str] = field(default_factory=list)
    facts: int = 0
    workflows: int = 0
    unchanged: int = 0

    @property
    def ok(self) -> bool:
        """True when the run finished and wrote what it found."""
        return self.error is None and not self.cancelled

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "method": self.method,
            "llm_configured": self.llm_configured,
            "ok": self.ok,
            "episodes": list(self.episodes),
            "created": list(self.created),
            "reinforced": list(self.reinforced),
            "superseded": list(self.superseded),
            "sessions": list(self.sessions),
            "facts": self.facts,
            "workflows": self.workflows,
            "unchanged": self.unchanged,
            "message": self.message,
            "cancelled": self.cancelled,
            "error": self.error,
        }


class _Cancelled(Exception):
    pass


@dataclass
class _SessionWork:
    session_id: str
    project: str | None
    metadata: dict[str, Any]
    observations: list[Memory]
    draft: EpisodeDraft | None = None
    provisional_id: int = 0


@dataclass(frozen=True)
class _Knowledge:
    """A fact or workflow to write, with its sources as provisional (episode) or real ids."""

    kind: str  # "fact" or "workflow"
    title: str
    content: str
    type: str
    layer: str
    project: str | None
    tags: tuple[str, ...]
    importance: float
    source_ids: tuple[int, ...]
    metadata: dict[str, Any]


def run(
    store: MemoryStore,
    *,
    now: datetime,
    llm: LLMConfig | None = None,
    progress: Progress | None = None,
    cancel: Callable[[], bool] | None = None,
    from_env: bool = True,
) -> ConsolidationReport:
    """Consolidate the store at ``now`` (see the module docstring). With ``llm`` None, ``MEMLENS_LLM_*`` decides
    whether the LLM is used (unless ``from_env`` is False: then the deterministic method runs). Never raises for LLM
    trouble: the report's ``error`` says what went wrong; a ``now`` outside MIN_TIME..MAX_TIME raises InvalidInput."""
    now = check_time(now, "now")
    config = llm
    if config is None and from_env:
        try:
            config = LLMConfig.from_env()
        except LLMError as exc:
            return _failed("llm", True, f"{exc}; nothing was written")
    method = "llm" if config is not None else "deterministic"
    report = ConsolidationReport(method=method, llm_configured=config is not None)
    client = LLMClient(config) if config is not None else None
    try:
        return _run(store, now, client, report, progress, cancel)
    except LLMError as exc:
        return _failed(method, config is not None, f"{exc}; nothing was written")
    except _Cancelled:
        report = ConsolidationReport(method=method, llm_configured=config is not None, cancelled=True)
        report.message = "consolidation cancelled; nothing was written"
        return report


def _failed(method: str, configured: bool, message: str) -> ConsolidationReport:
    return ConsolidationReport(method=method, llm_configured=configured, message=message, error=message)


def _run(
    store: MemoryStore,
    now: datetime,
    client: LLMClient | None,
    report: ConsolidationReport,
    progress: Progress | None,
    cancel: Callable[[], bool] | None,
) -> ConsolidationReport:
    def step(done: int, total: int, stage: str) -> None:
        if cancel is not None and cancel():
            raise _Cancelled
        if progress is not None:
            progress(done, total, stage)

    work = due_sessions(store, now)
    with store.ctx.read() as conn:
        state = _load_state(conn)
        unmined = _unmined_projects(conn, state)
    projects = sorted({w.project for w in work} | unmined, key=lambda p: (p is not None, p or ""))
    total = len(work) + len(projects) + 1
    done = 0
    step(done, total, "episodes")

    # 1. Episode drafts, with provisional ids above every id the store has given out.
    next_id = store.id_sequence() + 1
    for w in work:
        w.draft = llm_summarize_session(w.observations, client) if client is not None else summarize_session(w.observations)
        w.provisional_id = next_id
        next_id += 1
        done += 1
        step(done, total, "episodes")
    new_episodes = [_provisional_memory(w, now) for w in work]

    # 2. Facts and workflows per project.
    knowledge: list[_Knowledge] = []
    mined: dict[str, list[int]] = {}
    for project in projects:
        episodes = _latest_episodes(store, project, [e for e in new_episodes if e.project == project])
        key = project or ""
        if len(episodes) >= MIN_EPISODES and max(e.id for e in episodes) > state.get(key, 0):
            knowledge.extend(_extract(store, project, episodes, work, client))
            mined[key] = [e.id for e in episodes]
        done += 1
        step(done, total, "knowledge")

    # 3. Write everything at once.
    _write(store, now, work, knowledge, mined, report)
    done += 1
    if progress is not None:
        progress(done, total, "done")
    return report


def due_sessions(store: MemoryStore, now: datetime) -> list[_SessionWork]:
    """Sessions to summarise at ``now``: ended or idle for more than :data:`IDLE_MINUTES`, with observations newer
    than the last one summarised; oldest activity first."""
    ts = now.timestamp()
    idle = (now - timedelta(minutes=IDLE_MINUTES)).timestamp()
    with store.ctx.read() as conn:
        rows = conn.execute(
            "SELECT s.id, s.project, s.metadata FROM sessions s "
            "WHERE ((s.ended_at IS NOT NULL AND s.ended_at <= ?) OR s.last_event_at <= ?) "
            "AND EXISTS (SELECT 1 FROM memories m WHERE m.session_id = s.id AND m.layer = 'working' AND m.created_at <= ? "
            "AND m.id > COALESCE(json_extract(s.metadata, '$.summarized_through'), 0)) "
            "ORDER BY s.last_event_at, s.id",
            (ts, idle, ts),
        ).fetchall()
    out = []
    for session_id, project, metadata_text in rows:
        metadata = json.loads(metadata_text or "{}")
        through = metadata.get("summarized_through") if isinstance(metadata.get("summarized_through"), int) else 0
        observations = [
            m for m in _observations(store, session_id) if m.id > through and m.created_at <= now
        ]
        if observations:
            out.append(_SessionWork(session_id, project or observations[0].project, metadata, observations))
    return out


def _observations(store: MemoryStore, session_id: str) -> list[Memory]:
    """A session's working-layer observations, in order."""
    return store.session_memories(session_id, layers=["working"])


def _load_state(conn: Connection) -> dict[str, int]:
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (STATE_KEY,)).fetchone()
    if not row:
        return {}
    try:
        mined = json.loads(row[0]).get("mined_through", {})
        return {str(k): int(v) for k, v in mined.items()}
    except (ValueError, TypeError, AttributeError):
        return {}  # a damaged record only means the episodes are mined again; matches are reinforced, not duplicated


def _unmined_projects(conn: Connection, state: dict[str, int]) -> set[str | None]:
    """Projects whose newest episode was not yet mined (episodes written by an earlier, smaller run)."""
    out: set[str | None] = set()
    for project, top in conn.execute(
        "SELECT project, MAX(id) FROM memories WHERE layer = 'episodic' AND type = 'summary' AND is_latest = 1 GROUP BY project"
    ):
        if top > state.get(project or "", 0):
            out.add(project)
    return out


def _latest_episodes(store: MemoryStore, project: str | None, new: list[Memory]) -> list[Memory]:
    """The project's latest :data:`LATEST_EPISODES` episodes (stored ones and those about to be written), oldest first."""
    with store.ctx.read() as conn:
        rows = conn.execute(
            "SELECT id FROM memories WHERE layer = 'episodic' AND type = 'summary' AND is_latest = 1 AND project IS ? "
            "ORDER BY created_at DESC, id DESC LIMIT ?",
            (project, LATEST_EPISODES),
        ).fetchall()
    stored = store.get_many([r[0] for r in rows])
    episodes = sorted([*stored, *new], key=lambda m: (m.created_at, m.id), reverse=True)[:LATEST_EPISODES]
    return sorted(episodes, key=lambda m: (m.created_at, m.id))


def _provisional_memory(w: _SessionWork, now: datetime) -> Memory:
    assert w.draft is not None
    return Memory(
        id=w.provisional_id,
        layer="episodic",
        type="summary",
        title=w.draft.title,
        content=w.draft.content,
        project=w.project,
        session_id=w.session_id,
        tags=w.draft.tags,
        importance=w.draft.importance,
        origin="consolidation",
        source_ref=None,
        created_at=now,
        updated_at=now,
        last_accessed_at=now,
        access_count=0,
        version=1,
        parent_id=None,
        chain_id=w.provisional_id,
        supersedes=(),
        supersede_similarity=None,
        is_latest=True,
        forget_after=None,
        pinned=False,
        metadata=dict(w.draft.metadata),
    )


def _extract(
    store: MemoryStore, project: str | None, episodes: list[Memory], work: list[_SessionWork], client: LLMClient | None
) -> list[_Knowledge]:
    facts: list[FactDraft]
    workflows: list[WorkflowDraft]
    if client is not None:
        facts, workflows = llm_extract(episodes, client)
    else:
        facts = recurring_facts(episodes, min_episodes=MIN_FACT_EPISODES)
        pending = {w.session_id: w.observations for w in work}
        sessions: list[Sequence[Memory]] = []
        for sid in dict.fromkeys(e.session_id for e in episodes if e.session_id):
            observations = _observations(store, sid)
            if sid in pending:
                # A resumed session: its earlier observations belong to the same workflow history.
                merged = {m.id: m for m in [*observations, *pending[sid]]}
                observations = sorted(merged.values(), key=lambda m: (m.created_at, m.id))
            if observations:
                sessions.append(observations)
        workflows = recurring_workflows(sessions, min_sessions=MIN_WORKFLOW_SESSIONS, min_length=MIN_WORKFLOW_STEPS)[:MAX_WORKFLOWS]
    out = [
        _Knowledge(
            "fact",
            f.title,
            f.content,
            f.type,
            "semantic",
            project,
            f.tags,
            round(0.5 + 0.4 * f.confidence, 3),
            f.source_ids,
            {"support": f.support, "confidence": f.confidence},
        )
        for f in facts
    ]
    out += [
        _Knowledge(
            "workflow",
            w.title,
            w.content,
            "workflow",
            "procedural",
            project,
            ("workflow",),
            round(min(0.9, 0.5 + 0.1 * w.support), 3),
            w.source_ids,
            {"support": w.support, "steps": list(w.steps), "trigger": w.trigger},
        )
        for w in workflows
    ]
    return out


# --- writing ---------------------------------------------------------------------------------------------------


def _write(
    store: MemoryStore,
    now: datetime,
    work: list[_SessionWork],
    knowledge: list[_Knowledge],
    mined: dict[str, list[int]],
    report: ConsolidationReport,
) -> None:
    provisional = {w.provisional_id for w in work}
    with store.ctx.write() as conn:
        real: dict[int, int] = {}
        for w in work:
            assert w.draft is not None
            sources = _existing(conn, list(w.draft.source_ids))
            if not sources:
                continue  # every observation was forgotten meanwhile: nothing left to summarise
            title, _ = redact(w.draft.title)
            content, _ = redact(w.draft.content)
            episode_id = store.memories.insert_derived(
                conn, content=content, title=title[:300], type_="summary", layer="episodic", project=w.project, tags=w.draft.tags,
                importance=w.draft.importance, metadata=w.draft.metadata, derives_from=sources, now=now,
            )  # fmt: skip
            # Linked to its session directly: going through the session upsert would move the session's
            # last activity to the time of consolidation.
            conn.execute("UPDATE memories SET session_id = ? WHERE id = ?", (w.session_id, episode_id))
            meta = dict(w.metadata)
            meta["episode_ids"] = [*[i for i in meta.get("episode_ids", []) if isinstance(i, int)], episode_id]
            meta["summarized_through"] = max(m.id for m in w.observations)
            conn.execute("UPDATE sessions SET metadata = ? WHERE id = ?", (json.dumps(meta, ensure_ascii=False, sort_keys=True), w.session_id))
            real[w.provisional_id] = episode_id
            report.episodes.append(episode_id)
            report.sessions.append(w.session_id)
        for item in knowledge:
            sources = _existing(conn, [real.get(i, i) for i in item.source_ids])
            if not sources:
                continue
            _write_knowledge(store, conn, item, sources, now, report)
        report.facts = sum(1 for k in knowledge if k.kind == "fact")
        report.workflows = sum(1 for k in knowledge if k.kind == "workflow")
        if mined:
            state = _load_state(conn)
            for key, episode_ids in mined.items():
                # Provisional ids stand for the episodes just written: record their real ids.
                written = [real.get(i, i) for i in episode_ids if i not in provisional or i in real]
                state[key] = max([state.get(key, 0), *written])
            conn.execute(
                "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (STATE_KEY, json.dumps({"mined_through": state}, sort_keys=True)),
            )
        report.message = _message(report)
        counts = {
            "method": report.method,
            "sessions": len(report.sessions),
            "episodes": len(report.episodes),
            "facts": report.facts,
            "workflows": report.workflows,
            "created": len(report.created),
            "reinforced": len(report.reinforced),
            "superseded": len(report.superseded),
            "unchanged": report.unchanged,
        }
        targets = [*report.episodes, *report.created, *report.reinforced, *report.superseded]
        store.ctx.audit(conn, "consolidate", targets if len(targets) <= 1000 else [], counts, now)


def _existing(conn: Connection, ids: list[int]) -> list[int]:
    """The ids among ``ids`` that are still stored, in order (a source forgotten meanwhile is left out)."""
    ids = list(dict.fromkeys(ids))
    found = {r[0] for r in db.select_in(conn, "SELECT id FROM memories WHERE id IN ({marks})", ids)}
    return [i for i in ids if i in found]


def _write_knowledge(store: MemoryStore, conn: Connection, item: _Knowledge, sources: list[int], now: datetime, report: ConsolidationReport) -> None:
    settings = store.settings
    ts = now.timestamp()
    title, _ = redact(item.title)
    content, _ = redact(item.content)
    tokens = similarity_tokens(content)
    match = supersede.find_best(conn, tokens, layer=item.layer, project=item.project, probe_threshold=settings.supersede_threshold, now=ts)
    if match is not None:
        backed = {r[0] for r in conn.execute("SELECT dst_id FROM relations WHERE src_id = ? AND kind = 'derives'", (match.memory_id,))}
        if set(sources) <= backed:
            report.unchanged += 1  # the same finding from the same episodes: nothing new to say
            return
        if match.similarity >= settings.duplicate_threshold:
            _reinforce(store, conn, match.memory_id, now)
            for source in sources:
                store.memories.link(conn, match.memory_id, source, "derives", ts)
            report.reinforced.append(match.memory_id)
            return
    memory_id = store.memories.insert_derived(
        conn, content=content, title=title[:300], type_=item.type, layer=item.layer, project=item.project, tags=item.tags,
        importance=item.importance, metadata=item.metadata, derives_from=sources, detect=True, now=now,
    )  # fmt: skip
    report.created.append(memory_id)
    parent = conn.execute("SELECT parent_id FROM memories WHERE id = ?", (memory_id,)).fetchone()[0]
    if parent is not None:
        report.superseded.append(parent)


def _reinforce(store: MemoryStore, conn: Connection, memory_id: int, now: datetime) -> None:
    """Count a matching finding as one use of the existing memory, as a recall would."""
    ts = now.timestamp()
    row = conn.execute("SELECT layer, type, importance, last_accessed_at, access_count, pinned FROM memories WHERE id = ?", (memory_id,)).fetchone()
    layer, type_, importance, last, count, pinned = row
    last = max(last, ts)
    fade = decay.sweep_fade_at(layer, type_, importance, last, count + 1, bool(pinned), store.settings.decay)
    conn.execute("UPDATE memories SET last_accessed_at = ?, access_count = ?, fade_at = ? WHERE id = ?", (last, count + 1, fade, memory_id))
    conn.execute("INSERT INTO access_log(memory_id, at) VALUES (?, ?)", (memory_id, ts))


def _message(report: ConsolidationReport) -> str:
    how = "LLM" if report.method == "llm" else "deterministic (TF-IDF clustering, frequent tool-call sequences)"
    if not (report.episodes or report.created or report.reinforced):
        return f"{how} consolidation: nothing new to consolidate"
    return (
        f"{how} consolidation: {len(report.episodes)} sessions summarised into episodes; "
        f"{len(report.created)} facts and workflows written ({len(report.superseded)} as new versions), "
        f"{len(report.reinforced)} existing ones reinforced, {report.unchanged} unchanged"
    )
