"""Consolidation: working observations -> episodes -> semantic facts and procedural workflows.

One run:

1. **Episodes.** Every session that has ended, or has been idle for more than :data:`IDLE_MINUTES` at ``now``, and
   holds observations not yet summarised, gets one episodic ``summary`` memory built from those observations
   (:func:`memlens.episodes.summarize_session`, or :func:`memlens.llm.llm_summarize_session` with an LLM). The session's
   metadata records ``episode_ids`` and ``summarized_through`` (the last observation id summarised), so a session
   that resumes later gets a further episode for its new observations only.
2. **Knowledge.** For each project with at least :data:`MIN_EPISODES` episodes whose latest :data:`LATEST_EPISODES`
   include one not yet mined, the sessions of those episodes are read. With an LLM, it extracts facts and workflows
   from the episodes (:func:`memlens.llm.llm_extract`). Without one, only what the observations justify is promoted
   (:mod:`memlens.extract`): sentences that *state* a preference, decision or durable fact become semantic memories,
   quoted verbatim (:func:`~memlens.extract.stated_facts`); tool-call sequences that run and end with a shell command,
   seen with passing commands in :data:`MIN_WORKFLOW_SESSIONS` or more sessions, become procedural workflows
   (:func:`~memlens.extract.command_workflows`); a command failing with the same error in
   :data:`MIN_LESSON_SESSIONS` or more sessions becomes a procedural ``lesson`` (it passed again later) or a semantic
   ``bug`` (it never did) (:func:`~memlens.extract.failure_lessons`). Requests, chit-chat, speaker turns and tool
   output never become facts or workflows.

Every derived memory has origin ``consolidation`` and a ``derives`` relation to each of its sources: the episode's
observations, the observations a deterministic finding was read from, or the episodes the LLM cited. A derived
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
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from memlens import db, decay, supersede
from memlens.db import Connection
from memlens.episodes import EpisodeDraft, summarize_session
from memlens.extract import FactDraft, LessonDraft, WorkflowDraft, command_workflows, failure_lessons, stated_facts
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
#: A workflow must be seen in at least this many sessions, with at least this many steps.
MIN_WORKFLOW_SESSIONS = 3
MIN_WORKFLOW_STEPS = 3
#: At most this many workflows are taken from one pass (the most supported first).
MAX_WORKFLOWS = 10
#: A failure (same command, same error) must recur in this many sessions to become a lesson or a bug.
MIN_LESSON_SESSIONS = 2
#: Where consolidation remembers which episodes it has mined, per project (``meta`` table).
STATE_KEY = "consolidation_state"
#: Where consolidation remembers when it last ran and what started it (``meta`` table; read by the schedule).
LAST_RUN_KEY = "consolidation_last_run"

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
    lessons: int = 0
    unchanged: int = 0
    #: Sessions another process consolidated between this run's reading and its writing (left as they were).
    skipped_sessions: list[str] = field(default_factory=list)

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
            "lessons": self.lessons,
            "unchanged": self.unchanged,
            "skipped_sessions": list(self.skipped_sessions),
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

    kind: str  # "fact", "workflow" or "lesson" (lessons and bugs)
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
    trigger: str = "manual",
) -> ConsolidationReport:
    """Consolidate the store at ``now`` (see the module docstring). With ``llm`` None, ``MEMLENS_LLM_*`` decides
    whether the LLM is used (unless ``from_env`` is False: then the deterministic method runs). Never raises for LLM
    trouble: the report's ``error`` says what went wrong; a ``now`` outside MIN_TIME..MAX_TIME raises InvalidInput.
    A run that finishes records ``now`` and ``trigger`` ("manual", "schedule", "session_end") as the last run."""
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
        return _run(store, now, client, report, progress, cancel, trigger)
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
    trigger: str,
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
    _write(store, now, work, knowledge, mined, report, trigger)
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
            "AND m.id > COALESCE(CAST(json_extract(s.metadata, '$.summarized_through') AS BIGINT), 0)) "
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


def pending_work(store: MemoryStore, now: datetime) -> bool:
    """Whether a run at ``now`` has anything to do: a finished session with observations not yet summarised, or a
    project with enough episodes that were not yet mined for knowledge."""
    if due_sessions(store, now):
        return True
    with store.ctx.read() as conn:
        state = _load_state(conn)
        for project in _unmined_projects(conn, state):
            count = conn.execute(
                "SELECT COUNT(*) FROM memories WHERE layer = 'episodic' AND type = 'summary' AND is_latest = 1 AND project IS ?", (project,)
            ).fetchone()[0]
            if count >= MIN_EPISODES:
                return True
    return False


def last_run_at(store: MemoryStore) -> datetime | None:
    """When consolidation last finished a run (of any trigger), None when it never did."""
    with store.ctx.read() as conn:
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (LAST_RUN_KEY,)).fetchone()
    try:
        return datetime.fromtimestamp(float(json.loads(row[0])["at"]), tz=timezone.utc) if row else None
    except (ValueError, TypeError, KeyError):
        return None  # a damaged record: the schedule treats consolidation as never run, which only makes it due


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
    lessons: list[LessonDraft] = []
    if client is not None:
        facts, workflows = llm_extract(episodes, client)
    else:
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
        # Only what the observations justify, each citing the observations it comes from (see memlens.extract).
        facts = stated_facts(sessions)
        workflows = command_workflows(sessions, min_sessions=MIN_WORKFLOW_SESSIONS, min_length=MIN_WORKFLOW_STEPS)[:MAX_WORKFLOWS]
        lessons = failure_lessons(sessions, min_sessions=MIN_LESSON_SESSIONS)
        # Each finding also cites the episodes of the sessions it was read from: observations are working memory
        # and the sweep forgets them, while the episode that summarises them stays.
        facts = [replace(f, source_ids=_with_episodes(f.source_ids, sessions, episodes)) for f in facts]
        workflows = [replace(w, source_ids=_with_episodes(w.source_ids, sessions, episodes)) for w in workflows]
        lessons = [replace(x, source_ids=_with_episodes(x.source_ids, sessions, episodes)) for x in lessons]
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
            round(min(0.9, 0.5 + 0.1 * w.support), 3) if client is not None else round(min(0.8, 0.5 + 0.05 * w.support), 3),
            w.source_ids,
            {"support": w.support, "steps": list(w.steps), "trigger": w.trigger},
        )
        for w in workflows
    ]
    out += [
        _Knowledge(
            "lesson",
            lesson.title,
            lesson.content,
            lesson.type,
            "procedural" if lesson.type == "lesson" else "semantic",
            project,
            (lesson.type, "failure"),
            round(min(0.8, 0.5 + 0.05 * lesson.support), 3),
            lesson.source_ids,
            {"support": lesson.support, "resolved": lesson.resolved, "step": lesson.step, "error": lesson.error},
        )
        for lesson in lessons
    ]
    return out


def _with_episodes(source_ids: Sequence[int], sessions: Sequence[Sequence[Memory]], episodes: Sequence[Memory]) -> tuple[int, ...]:
    """``source_ids`` (observations) followed by the episodes of their sessions, in order."""
    session_of = {m.id: m.session_id for observations in sessions for m in observations}
    cited = {session_of.get(i) for i in source_ids}
    return (*source_ids, *(e.id for e in episodes if e.session_id is not None and e.session_id in cited))


# --- writing ---------------------------------------------------------------------------------------------------


def _write(
    store: MemoryStore,
    now: datetime,
    work: list[_SessionWork],
    knowledge: list[_Knowledge],
    mined: dict[str, list[int]],
    report: ConsolidationReport,
    trigger: str,
) -> None:
    provisional = {w.provisional_id for w in work}
    with store.ctx.write() as conn:
        real: dict[int, int] = {}
        for w in work:
            assert w.draft is not None
            if _summarized_through(conn, w.session_id) != _summarized_through_of(w.metadata):
                # Another process consolidated this session after we read it: never write a second episode.
                report.skipped_sessions.append(w.session_id)
                continue
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
            # A provisional id whose episode was not written stands for nothing: it is dropped, never reused.
            ids = [real[i] if i in provisional else i for i in item.source_ids if i not in provisional or i in real]
            sources = _existing(conn, ids)
            if not sources:
                continue
            _write_knowledge(store, conn, item, sources, now, report)
        report.facts = sum(1 for k in knowledge if k.kind == "fact")
        report.workflows = sum(1 for k in knowledge if k.kind == "workflow")
        report.lessons = sum(1 for k in knowledge if k.kind == "lesson")
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
        conn.execute(
            "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (LAST_RUN_KEY, json.dumps({"at": now.timestamp(), "trigger": trigger}, sort_keys=True)),
        )
        report.message = _message(report)
        counts = {
            "method": report.method,
            "sessions": len(report.sessions),
            "episodes": len(report.episodes),
            "facts": report.facts,
            "workflows": report.workflows,
            "lessons": report.lessons,
            "created": len(report.created),
            "reinforced": len(report.reinforced),
            "superseded": len(report.superseded),
            "unchanged": report.unchanged,
            "trigger": trigger,
        }
        targets = [*report.episodes, *report.created, *report.reinforced, *report.superseded]
        store.ctx.audit(conn, "consolidate", targets if len(targets) <= 1000 else [], counts, now)


def _summarized_through(conn: Connection, session_id: str) -> int:
    row = conn.execute("SELECT metadata FROM sessions WHERE id = ?", (session_id,)).fetchone()
    return _summarized_through_of(json.loads(row[0] or "{}") if row else {})


def _summarized_through_of(metadata: dict[str, Any]) -> int:
    value = metadata.get("summarized_through")
    return value if isinstance(value, int) else 0


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
    same = _same_finding(conn, item)
    if same is not None:
        # The same routine or failure found again (its counts and example may read differently): one memory.
        backed = {r[0] for r in conn.execute("SELECT dst_id FROM relations WHERE src_id = ? AND kind = 'derives'", (same,))}
        if set(sources) <= backed:
            report.unchanged += 1
        else:
            _reinforce(store, conn, same, now)
            for source in sources:
                store.memories.link(conn, same, source, "derives", ts)
            report.reinforced.append(same)
        return
    match = supersede.find_best(
        conn, tokens, layer=item.layer, project=item.project, probe_threshold=settings.supersede_threshold, now=ts, postings=store.ctx.postings
    )
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


#: The metadata that names what a deterministic workflow or lesson is about, whatever its text says.
_FINDING_KEYS = {"workflow": ("steps",), "lesson": ("step", "error")}


def _same_finding(conn: Connection, item: _Knowledge) -> int | None:
    """The latest memory of the project recording the same workflow (steps) or failure (step and error), if any."""
    keys = _FINDING_KEYS.get(item.kind)
    if keys is None or any(k not in item.metadata for k in keys):
        return None
    where = " AND ".join(f"json_extract(metadata, '$.{k}') = json_extract(?, '$.{k}')" for k in keys)
    row = conn.execute(
        f"SELECT id FROM memories WHERE is_latest = 1 AND layer = ? AND type = ? AND project IS ? AND origin = 'consolidation' AND {where} "
        "ORDER BY id DESC LIMIT 1",
        (item.layer, item.type, item.project, *[json.dumps({k: item.metadata[k]}) for k in keys]),
    ).fetchone()
    return int(row[0]) if row else None


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
    how = "LLM" if report.method == "llm" else "deterministic (stated facts, passing command sequences, recurring failures)"
    if not (report.episodes or report.created or report.reinforced):
        return f"{how} consolidation: nothing new to consolidate"
    return (
        f"{how} consolidation: {len(report.episodes)} sessions summarised into episodes; "
        f"{len(report.created)} facts, workflows and lessons written ({len(report.superseded)} as new versions), "
        f"{len(report.reinforced)} existing ones reinforced, {report.unchanged} unchanged"
    )
