"""The sweep rules are one registry (memlens.rules.RULES): the sweep plans by it, explain explains by it, the GUI's
settings and sweep preview list it; a rule registered from outside is applied, explained and previewed like the
built-in ones without any other file changing."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from memlens import MemoryStore, rules
from memlens import sweep as sweep_engine
from memlens.config import StoreSettings
from memlens.gui.dialogs import SettingsDialog, SweepPreviewDialog
from memlens.gui.preferences import Preferences
from memlens.models import Memory
from memlens.rules.base import MemoryRow, RowRule, SweepDecision, SweepView
from memlens.sweep import StoreView

DAY = timedelta(days=1)
HOUR = timedelta(hours=1)


class ScratchRule(RowRule):
    """A toy rule: memories tagged ``scratch`` are forgotten a day after they were written."""

    name = "scratch"
    label = "Scratch"
    description = "A memory tagged scratch is forgotten a day after it was written."

    def candidates(self, view: SweepView, settings: StoreSettings, now_ts: float, cutoff: float) -> list[MemoryRow]:
        return view.memories(tag="scratch", created_by=min(cutoff, now_ts - 86400.0))

    def decide(self, row: MemoryRow, settings: StoreSettings, now_ts: float) -> SweepDecision | None:
        days = (now_ts - row.created_at) / 86400.0
        if "scratch" not in row.tags or days < 1:
            return None
        return SweepDecision(row.id, self.name, "forget", {"age_days": round(days, 4)}, f"scratch notes last a day; this one is {days:.0f} days old", row.title)

    def sentence(self, decision: SweepDecision, memory: Memory, settings: StoreSettings, now: datetime) -> str:
        return f"A scratch note {decision.numbers['age_days']:.0f} days old: the next sweep forgets it."


def _first_sentences(store: MemoryStore, now: datetime) -> dict[int, str]:
    """memory id -> what the rule that takes it says in explain, for each decision of a dry run at ``now``."""
    view = StoreView(store.conn)
    out = {}
    for d in store.sweep(now=now, dry_run=True).decisions:
        fate = rules.rule_named(d.rule).fate(store.get(d.memory_id), view, store.settings, now)
        assert fate is not None, d
        out[d.memory_id] = fate
    return out


def _legend(report: sweep_engine.SweepReport, qtbot) -> str:
    dialog = SweepPreviewDialog(report, "Preview")
    qtbot.addWidget(dialog)
    return dialog.rules.text()


def test_the_registry_drives_sweep_explain_and_preview_alike(store: MemoryStore, t0, qtbot, monkeypatch: pytest.MonkeyPatch):
    ttl = store.remember("The release freeze lasts until Friday", ttl_days=2, now=t0)
    chat = store.remember("brb, coffee", type="chitchat", importance=0.0, now=t0)
    fact = store.remember("The invoice service is written in Go", importance=0.0, now=t0)
    now = t0 + 3 * DAY
    report = store.sweep(now=now, dry_run=True)
    assert list(report.counts) == list(rules.names()) == list(rules.BUILT_IN_NAMES)
    assert {d.memory_id: d.rule for d in report.decisions} == {ttl.id: "ttl", chat.id: "weak"}
    # explain says exactly the sentence of the rule the sweep decided by
    for memory_id, sentence in _first_sentences(store, now).items():
        assert store.explain(memory_id, now=now).startswith(sentence)
    assert "next sweep" not in store.explain(fact.id, now=now)
    legend = _legend(report, qtbot)
    assert all(rule.label in legend for rule in rules.RULES)
    dialog = SettingsDialog(Preferences(), store.settings)
    qtbot.addWidget(dialog)
    assert set(dialog.rule_settings) == {s.key for rule in rules.RULES for s in rule.settings}

    # Take the weak rule out of the registry: the sweep, explain and the preview all drop it.
    monkeypatch.setattr(rules, "RULES", [rule for rule in rules.RULES if rule.name != "weak"])
    report = store.sweep(now=now, dry_run=True)
    assert "weak" not in report.counts and [d.memory_id for d in report.decisions] == [ttl.id]
    assert "next sweep forgets it" not in store.explain(chat.id, now=now)
    assert "Weak" not in _legend(report, qtbot) and "TTL" in _legend(report, qtbot)
    store.sweep(now=now)
    assert store.exists(chat.id) and not store.exists(ttl.id)


def test_a_rule_registered_outside_is_applied_explained_and_previewed(store: MemoryStore, t0, qtbot, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(rules, "RULES", list(rules.RULES))  # register() changes this copy; the test leaves the real list alone
    rules.register(ScratchRule(), before="capacity")
    assert rules.names() == ("conflict", "ttl", "weak", "low_value", "duplicate", "scratch", "capacity")
    with pytest.raises(ValueError):
        rules.register(ScratchRule())

    notes = [store.remember(f"Scratch note {i}: try the {w} flag", tags=["scratch"], importance=0.9, now=t0) for i, w in enumerate(("fast", "slow"))]
    young = store.remember("Scratch note: try the quiet flag", tags=["scratch"], importance=0.9, now=t0 + 2 * DAY)
    kept = store.remember("Keep: the deploy key lives in the vault", tags=["ops"], importance=0.9, now=t0)
    now = t0 + 2 * DAY + 2 * HOUR

    report = store.sweep(now=now, dry_run=True)
    assert [(d.memory_id, d.rule) for d in report.decisions] == [(n.id, "scratch") for n in notes]
    assert report.counts["scratch"] == 2 and "2 scratch" in report.summary()
    assert store.explain(notes[0].id, now=now).startswith("A scratch note 2 days old: the next sweep forgets it.")
    assert "next sweep" not in store.explain(young.id, now=now) and "next sweep" not in store.explain(kept.id, now=now)
    legend = _legend(report, qtbot)
    assert "<b>Scratch</b> (2): A memory tagged scratch is forgotten a day after it was written." in legend
    dialog = SettingsDialog(Preferences(), store.settings)
    qtbot.addWidget(dialog)
    assert dialog.findChild(type(dialog.error), "settingsRule_scratch") is not None

    # A real sweep applies it, one decision a batch, each checked again by the rule before it is carried out.
    monkeypatch.setattr(sweep_engine, "APPLY_BATCH", 1)
    done = store.sweep(now=now)
    assert [d.memory_id for d in done.decisions] == [n.id for n in notes] and done.counts["scratch"] == 2
    assert not any(store.exists(n.id) for n in notes) and store.exists(young.id) and store.exists(kept.id)
    entry = next(e for e in store.audit(operation="sweep") if notes[0].id in e.target_ids)
    assert entry.details["rule"] == "scratch" and entry.details["numbers"] == {"age_days": 2.0833}
    assert store.explain(notes[0].id, now=now).startswith("Forgotten by the sweep on 2026-01-07 11:00 +00:00 (scratch): scratch notes last a day")

    rules.unregister("scratch")
    assert rules.names() == rules.BUILT_IN_NAMES
