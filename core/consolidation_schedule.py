"""Consolidation that runs by itself: on a schedule (cron, systemd timers, the app's timer) and when a session ends.

Both are opt-in store settings (:class:`memlens.config.ConsolidationSchedule`), so the agent's hooks, a cron job and
the app agree on them. Each call takes an explicit ``now`` and answers with a :class:`ScheduledRun` whose
``summary`` is one line fit for a log.

* :func:`consolidate_due` runs when the schedule is on and ``interval_hours`` have passed since the last
  consolidation of any kind (by hand, scheduled or at a session's end), so cron and the app never double up.
* :func:`consolidate_after_session` runs when ``on_session_end`` is on, the session has observations not yet
  consolidated, and the last consolidation is at least ``cooldown_minutes`` old. A session skipped for the
  cooldown is consolidated by the next run, whatever starts it.

Neither ever consolidates a session twice: every session records the last observation its episodes cover
(``summarized_through`` in its metadata), a run only reads observations after it, and the run's write checks that
record again inside its transaction, so two processes starting at once cannot both write an episode for it. A call
with nothing to do writes nothing (no audit entry either) and says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from memlens.consolidate import ConsolidationReport, last_run_at, pending_work, run
from memlens.storage.validation import check_time

if TYPE_CHECKING:
    from memlens.llm import LLMConfig
    from memlens.store import MemoryStore

#: What a call did (``ScheduledRun.status``).
RAN = "ran"  # consolidation ran and wrote what it found
FAILED = "failed"  # consolidation ran into an LLM error or was cancelled; nothing was written
DISABLED = "disabled"  # the setting that allows this trigger is off
NOT_DUE = "not_due"  # the interval since the last consolidation has not passed yet
COOLDOWN = "cooldown"  # a session ended too soon after the last consolidation
NOTHING_NEW = "nothing_new"  # it was time, but no session or episode was waiting


@dataclass(frozen=True)
class ScheduledRun:
    """The answer of a scheduled or session-end consolidation: ``status`` (one of the constants above), the
    ``trigger`` ("schedule" or "session_end"), a one-line ``summary``, when the next run is due (None while the
    trigger is off), and the consolidation ``report`` when one ran."""

    status: str
    trigger: str
    summary: str
    now: datetime
    last_run_at: datetime | None
    next_due_at: datetime | None
    report: ConsolidationReport | None = None
    session_id: str | None = None

    @property
    def ok(self) -> bool:
        """False only when a consolidation ran and failed."""
        return self.status != FAILED

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "status": self.status,
            "trigger": self.trigger,
            "ok": self.ok,
            "summary": self.summary,
            "now": self.now.isoformat(),
            "last_run_at": self.last_run_at.isoformat() if self.last_run_at else None,
            "next_due_at": self.next_due_at.isoformat() if self.next_due_at else None,
            "session_id": self.session_id,
            "report": self.report.to_dict() if self.report is not None else None,
        }


def next_due_at(store: MemoryStore, now: datetime) -> datetime | None:
    """When the schedule next wants to consolidate (``now`` when it is already due); None while it is off."""
    schedule = store.settings.consolidation
    if not schedule.enabled:
        return None
    last = last_run_at(store)
    if last is None:
        return now
    return max(now, last + timedelta(hours=schedule.interval_hours))


def consolidate_due(
    store: MemoryStore, *, now: datetime, force: bool = False, llm: LLMConfig | None = None, from_env: bool = True
) -> ScheduledRun:
    """Consolidate if the schedule is on and its interval has passed since the last consolidation (``force``: if
    anything is waiting, whatever the schedule says, as the app's "run now" does). Idempotent: a second call at
    the same ``now`` finds the interval not yet passed, or nothing new, and writes nothing."""
    now = check_time(now, "now")
    schedule = store.settings.consolidation
    last = last_run_at(store)
    if not force:
        if not schedule.enabled:
            return ScheduledRun(
                DISABLED, "schedule", "scheduled consolidation is off (turn it on with: memlens consolidate --schedule on)", now, last, None
            )
        due = next_due_at(store, now)
        if due is not None and due > now:
            return ScheduledRun(NOT_DUE, "schedule", f"not due: last consolidation {_when(last)}, next {_when(due)}", now, last, due)
    return _run_if_pending(store, now, "schedule", None, llm, from_env)


def consolidate_after_session(store: MemoryStore, session_id: str, *, now: datetime) -> ScheduledRun:
    """Consolidate after ``session_id`` ended, if ``on_session_end`` is on and the cooldown has passed (the
    deterministic method or ``MEMLENS_LLM_*``). Consolidates every finished session, not only this one; a session
    already consolidated up to its last observation is a no-op."""
    now = check_time(now, "now")
    schedule = store.settings.consolidation
    last = last_run_at(store)
    due = next_due_at(store, now)
    if not schedule.on_session_end:
        return ScheduledRun(DISABLED, "session_end", "consolidation at session end is off", now, last, due, session_id=session_id)
    if not _has_unconsolidated(store, session_id):
        return ScheduledRun(
            NOTHING_NEW, "session_end", f"session {session_id} is already consolidated", now, last, due, session_id=session_id
        )
    if last is not None and now < last + timedelta(minutes=schedule.cooldown_minutes):
        until = last + timedelta(minutes=schedule.cooldown_minutes)
        return ScheduledRun(
            COOLDOWN, "session_end", f"cooling down until {_when(until)}; session {session_id} waits for the next run",
            now, last, due, session_id=session_id,
        )  # fmt: skip
    return _run_if_pending(store, now, "session_end", session_id, None, True)


def _run_if_pending(
    store: MemoryStore, now: datetime, trigger: str, session_id: str | None, llm: LLMConfig | None, from_env: bool
) -> ScheduledRun:
    last = last_run_at(store)
    if not pending_work(store, now):
        due = next_due_at(store, now)
        return ScheduledRun(NOTHING_NEW, trigger, "nothing new to consolidate", now, last, due, session_id=session_id)
    report = run(store, now=now, llm=llm, from_env=from_env, trigger=trigger)
    status = RAN if report.ok else FAILED
    last_now = last_run_at(store) if report.ok else last
    schedule = store.settings.consolidation
    due = last_now + timedelta(hours=schedule.interval_hours) if schedule.enabled and last_now else None
    return ScheduledRun(status, trigger, report.message, now, last_now, due, report, session_id)


def _has_unconsolidated(store: MemoryStore, session_id: str) -> bool:
    """Whether the session holds working observations after the last one its episodes cover."""
    with store.ctx.read() as conn:
        row = conn.execute(
            "SELECT EXISTS (SELECT 1 FROM memories m WHERE m.session_id = s.id AND m.layer = 'working' "
            "AND m.id > COALESCE(CAST(json_extract(s.metadata, '$.summarized_through') AS BIGINT), 0)) FROM sessions s WHERE s.id = ?",
            (session_id,),
        ).fetchone()
    return bool(row and row[0])


def _when(moment: datetime | None) -> str:
    return "never" if moment is None else moment.strftime("%Y-%m-%d %H:%M UTC")
