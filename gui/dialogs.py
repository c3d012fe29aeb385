"""Small dialogs: forget confirmation, edit, settings, sweep preview and time-travel date."""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from memlens import rules
from memlens.config import StoreSettings
from memlens.decay import DEFAULT_RATES
from memlens.gui import format as fmt
from memlens.gui.preferences import Preferences
from memlens.gui.qt import QtCore, QtWidgets, Signal
from memlens.gui.theme import THEMES
from memlens.models import Memory


def _name(widget: QtWidgets.QWidget, name: str, accessible: str) -> Any:
    widget.setObjectName(name)
    widget.setAccessibleName(accessible)
    return widget


def _save_cancel(dialog: QtWidgets.QDialog, save_name: str, save: Callable[[], object]) -> QtWidgets.QDialogButtonBox:
    """Save and Cancel buttons: Save (objectName ``save_name``) calls ``save``, Cancel rejects ``dialog``."""
    buttons = QtWidgets.QDialogButtonBox(QtWidgets.QDialogButtonBox.StandardButton.Save | QtWidgets.QDialogButtonBox.StandardButton.Cancel)
    _name(buttons.button(QtWidgets.QDialogButtonBox.StandardButton.Save), save_name, "Save")
    buttons.accepted.connect(save)
    buttons.rejected.connect(dialog.reject)
    return buttons


# --- forget ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ForgetPlan:
    """What a forget would erase: the selected memories and, per memory, the other versions of its chain."""

    memories: list[Memory]
    chain_extra: dict[int, list[int]]

    @property
    def extra_versions(self) -> int:
        """How many other versions the whole-chain option would add."""
        selected = {m.id for m in self.memories}
        return len({i for ids in self.chain_extra.values() for i in ids} - selected)


class ForgetDialog(QtWidgets.QDialog):
    """Says exactly what will be erased, offers the whole chain and asks for an optional reason."""

    def __init__(self, plan: ForgetPlan, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("forgetDialog")
        self.setWindowTitle("Forget memories" if len(plan.memories) > 1 else "Forget memory")
        self.plan = plan
        n = len(plan.memories)
        head = QtWidgets.QLabel(f"<b>Erase {fmt.plural(n, 'memory', 'memories')} for good?</b>")
        head.setObjectName("forgetHeading")
        items = "".join(f"<li>#{m.id} v{m.version} <i>{html.escape(m.title[:90])}</i> ({m.layer})</li>" for m in plan.memories[:12])
        if n > 12:
            items += f"<li>… and {n - 12} more</li>"
        listing = QtWidgets.QLabel(f"<ul style='margin:0'>{items}</ul>")
        listing.setWordWrap(True)
        listing.setObjectName("forgetList")
        self.whole_chain = _name(QtWidgets.QCheckBox(), "forgetWholeChain", "Erase the whole version chain")
        extra = plan.extra_versions
        if extra:
            chains = "its chain" if len(plan.memories) == 1 else "their chains"
            self.whole_chain.setText(f"Also erase the other {fmt.plural(extra, 'version')} of {chains}")
        else:
            self.whole_chain.setText("Erase the whole version chain (there are no other versions)")
            self.whole_chain.setEnabled(False)
        self.consequence = QtWidgets.QLabel()
        self.consequence.setObjectName("forgetConsequence")
        self.consequence.setWordWrap(True)
        self.reason = _name(QtWidgets.QLineEdit(), "forgetReason", "Reason")
        self.reason.setPlaceholderText("optional - kept in the audit log")
        note = QtWidgets.QLabel(
            "The text leaves the database, the search index and the write-ahead log. The audit log keeps only the ids, "
            "a SHA-256 of the text and your reason."
        )
        note.setWordWrap(True)
        note.setStyleSheet("color: gray")
        buttons = QtWidgets.QDialogButtonBox()
        self.forget_button = _name(buttons.addButton("Forget", QtWidgets.QDialogButtonBox.ButtonRole.AcceptRole), "forgetConfirm", "Forget")
        _name(buttons.addButton(QtWidgets.QDialogButtonBox.StandardButton.Cancel), "forgetCancel", "Cancel")
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        form = QtWidgets.QFormLayout()
        form.addRow("Reason", self.reason)
        layout = QtWidgets.QVBoxLayout(self)
        layout.addWidget(head)
        layout.addWidget(listing)
        layout.addWidget(self.whole_chain)
        layout.addWidget(self.consequence)
        layout.addLayout(form)
        layout.addWidget(note)
        layout.addWidget(buttons)
        self.whole_chain.toggled.connect(self._update)
        self._update()
        self.resize(520, self.sizeHint().height())

    def _update(self) -> None:
        n = len(self.plan.memories)
        if self.whole_chain.isChecked():
            total = n + self.plan.extra_versions
            self.consequence.setText(f"{fmt.plural(total, 'memory version', 'memory versions')} will be erased: every version of each chain.")
        else:
            restored = sum(1 for m in self.plan.memories if m.is_latest and self.plan.chain_extra.get(m.id))
            text = f"{fmt.plural(n, 'memory version', 'memory versions')} will be erased; other versions stay."
            if restored:
                text += f" {fmt.plural(restored, 'older version')} will become latest again."
            self.consequence.setText(text)

    def values(self) -> tuple[bool, str | None]:
        """(whole chain, reason or None)."""
        return self.whole_chain.isChecked(), (self.reason.text().strip() or None)


# --- edit ------------------------------------------------------------------------------------------------------


class EditDialog(QtWidgets.QDialog):
    """Edit a memory's importance, tags, pinning, project and TTL (its text never changes in place)."""

    def __init__(self, memory: Memory, parent: QtWidgets.QWidget | None = None, *, now: datetime | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("editDialog")
        self.setWindowTitle(f"Edit #{memory.id}")
        self.memory = memory
        self.importance = _name(QtWidgets.QDoubleSpinBox(), "editImportance", "Importance")
        self.importance.setRange(0.0, 1.0)
        self.importance.setSingleStep(0.05)
        self.importance.setDecimals(2)
        self.importance.setValue(memory.importance)
        self.tags = _name(QtWidgets.QLineEdit(", ".join(memory.tags)), "editTags", "Tags")
        self.tags.setPlaceholderText("comma-separated")
        self.pinned = _name(QtWidgets.QCheckBox("Pinned: keeps its strength and no sweep ever touches it"), "editPinned", "Pinned")
        self.pinned.setChecked(memory.pinned)
        self.project = _name(QtWidgets.QLineEdit(memory.project or ""), "editProject", "Project")
        self.project.setPlaceholderText("none")
        # The TTL as days from now; 0 means none. Saved only when changed, so an untouched dialog keeps the expiry.
        self.ttl = _name(QtWidgets.QDoubleSpinBox(), "editTtl", "Forget after (days from now)")
        self.ttl.setRange(0.0, 36500.0)
        self.ttl.setDecimals(1)
        self.ttl.setSpecialValueText("no TTL")
        self.ttl.setSuffix(" days")
        moment = now or datetime.now(timezone.utc)
        self._ttl_days = round(max(0.0, (memory.forget_after - moment).total_seconds() / 86400), 1) if memory.forget_after else 0.0
        if memory.forget_after is not None and self._ttl_days == 0.0:
            self._ttl_days = 0.1  # expired or about to: still a TTL, not "none"
        self.ttl.setValue(self._ttl_days)
        title = QtWidgets.QLabel(f"<b>#{memory.id}</b> {html.escape(memory.title)}")
        title.setWordWrap(True)
        note = QtWidgets.QLabel("To change the text, store a new version (File > New memory): text is never edited in place.")
        note.setWordWrap(True)
        note.setStyleSheet("color: gray")
        form = QtWidgets.QFormLayout()
        form.addRow("Importance", self.importance)
        form.addRow("Tags", self.tags)
        form.addRow("", self.pinned)
        form.addRow("Project", self.project)
        form.addRow("Forget after", self.ttl)
        buttons = _save_cancel(self, "editSave", self.accept)
        layout = QtWidgets.QVBoxLayout(self)
        layout.addWidget(title)
        layout.addLayout(form)
        layout.addWidget(note)
        layout.addWidget(buttons)
        self.resize(460, self.sizeHint().height())

    def changes(self) -> dict[str, Any]:
        """The keyword arguments for ``MemoryStore.update`` that differ from the memory (empty: nothing changed)."""
        out: dict[str, Any] = {}
        if round(self.importance.value(), 4) != round(self.memory.importance, 4):
            out["importance"] = round(self.importance.value(), 4)
        tags = [t.strip() for t in self.tags.text().split(",") if t.strip()]
        if tuple(tags) != self.memory.tags:
            out["tags"] = tags
        if self.pinned.isChecked() != self.memory.pinned:
            out["pinned"] = self.pinned.isChecked()
        project = self.project.text().strip() or None
        if project != self.memory.project:
            out.update({"project": project} if project else {"clear_project": True})
        ttl = round(self.ttl.value(), 1)
        if ttl != self._ttl_days:
            out.update({"ttl_days": ttl} if ttl > 0 else {"clear_ttl": True})
        return out


# --- settings --------------------------------------------------------------------------------------------------


class SettingsDialog(QtWidgets.QDialog):
    """Timers, theme and LLM endpoint (the person's, kept in QSettings) and the store's thresholds and decay rates
    (shared by every process using the store, changed with ``MemoryStore.configure``)."""

    def __init__(self, prefs: Preferences, store_settings: StoreSettings | None, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("settingsDialog")
        self.setWindowTitle("Settings")
        self.prefs = prefs
        self.store_settings = store_settings
        tabs = QtWidgets.QTabWidget()
        tabs.setObjectName("settingsTabs")

        timers = QtWidgets.QWidget()
        form = QtWidgets.QFormLayout(timers)
        self.refresh_minutes = self._spin("settingsRefresh", "Refresh strengths every", 1, 24 * 60, max(1, round(prefs.refresh_seconds / 60)), " min")
        self.sweep_minutes = self._spin("settingsSweep", "Auto-forget sweep every", 1, 7 * 24 * 60, max(1, round(prefs.sweep_seconds / 60)), " min")
        self.live_ms = self._spin("settingsLive", "Check for other processes' writes every", 200, 60_000, prefs.live_poll_ms, " ms")
        form.addRow("Refresh strengths every", self.refresh_minutes)
        form.addRow("Auto-forget sweep every", self.sweep_minutes)
        form.addRow("Check for changes every", self.live_ms)
        form.addRow(self._consolidation_schedule(store_settings))
        tabs.addTab(timers, "Timers")

        engine = QtWidgets.QWidget()
        engine_layout = QtWidgets.QVBoxLayout(engine)
        eform = QtWidgets.QFormLayout()
        s = store_settings or StoreSettings()
        self.supersede = self._double("settingsSupersede", "Supersede threshold", s.supersede_threshold)
        self.advisory = self._double("settingsAdvisory", "Similar-to threshold", s.advisory_threshold)
        self.reinforcement = self._double("settingsReinforcement", "Reinforcement per recall", s.decay.reinforcement, maximum=10.0)
        eform.addRow("Supersede above similarity", self.supersede)
        eform.addRow("Report “similar to” above", self.advisory)
        eform.addRow("Reinforcement per recall", self.reinforcement)
        engine_layout.addLayout(eform)
        engine_layout.addWidget(self._sweep_rules(s))
        engine_layout.addWidget(QtWidgets.QLabel("Decay rates (per hour) by memory type:"))
        self.rates = QtWidgets.QTableWidget(0, 2)
        _name(self.rates, "settingsRates", "Decay rates")
        self.rates.setHorizontalHeaderLabels(["Type", "Rate per hour"])
        self.rates.horizontalHeader().setStretchLastSection(True)
        self.rates.verticalHeader().setVisible(False)
        rates = dict(DEFAULT_RATES)
        rates.update(s.decay.rates)
        for type_name in sorted(rates):
            row = self.rates.rowCount()
            self.rates.insertRow(row)
            item = QtWidgets.QTableWidgetItem(type_name)
            item.setFlags(item.flags() & ~QtCore.Qt.ItemFlag.ItemIsEditable)
            self.rates.setItem(row, 0, item)
            self.rates.setItem(row, 1, QtWidgets.QTableWidgetItem(f"{rates[type_name]:g}"))
        engine_layout.addWidget(self.rates, 1)
        note = QtWidgets.QLabel("These rules live in the store: the agent and every other process using it apply them too.")
        note.setWordWrap(True)
        note.setStyleSheet("color: gray")
        engine_layout.addWidget(note)
        engine.setEnabled(store_settings is not None)
        tabs.addTab(engine, "Engine")

        llm = QtWidgets.QWidget()
        lform = QtWidgets.QFormLayout(llm)
        self.llm_url = _name(QtWidgets.QLineEdit(prefs.llm_base_url), "settingsLlmUrl", "LLM endpoint")
        self.llm_url.setPlaceholderText("http://localhost:11434/v1 (empty: no LLM)")
        self.llm_model = _name(QtWidgets.QLineEdit(prefs.llm_model), "settingsLlmModel", "LLM model")
        self.llm_model.setPlaceholderText("e.g. llama3.1")
        lform.addRow("OpenAI-compatible endpoint", self.llm_url)
        lform.addRow("Model", self.llm_model)
        key_note = QtWidgets.QLabel(
            "Consolidation uses the LLM when both are set; without one it runs the built-in heuristic method. "
            "An API key, if the endpoint needs one, is read from MEMLENS_LLM_API_KEY or OPENAI_API_KEY and never stored."
        )
        key_note.setWordWrap(True)
        lform.addRow(key_note)
        tabs.addTab(llm, "LLM")

        look = QtWidgets.QWidget()
        aform = QtWidgets.QFormLayout(look)
        self.theme = _name(QtWidgets.QComboBox(), "settingsTheme", "Theme")
        for name in THEMES:
            self.theme.addItem(name.capitalize(), name)
        self.theme.setCurrentIndex(max(0, self.theme.findData(prefs.theme)))
        aform.addRow("Theme", self.theme)
        tabs.addTab(look, "Appearance")

        self.error = QtWidgets.QLabel()
        self.error.setObjectName("settingsError")
        self.error.setStyleSheet("color: #c0392b")
        self.error.setWordWrap(True)
        buttons = _save_cancel(self, "settingsSave", self._accept)
        layout = QtWidgets.QVBoxLayout(self)
        layout.addWidget(tabs)
        layout.addWidget(self.error)
        layout.addWidget(buttons)
        self.resize(520, 520)

    def _consolidation_schedule(self, store_settings: StoreSettings | None) -> QtWidgets.QGroupBox:
        """The store's opt-in consolidation schedule: shared with cron (memlens consolidate --due) and agent hooks."""
        schedule = (store_settings or StoreSettings()).consolidation
        box = QtWidgets.QGroupBox("Scheduled consolidation (kept in the store: cron, hooks and this app share it)")
        box.setObjectName("settingsConsolidation")
        form = QtWidgets.QFormLayout(box)
        self.consolidation_enabled = _name(QtWidgets.QCheckBox("Consolidate on a schedule"), "settingsConsolidationEnabled", "Consolidate on a schedule")
        self.consolidation_enabled.setChecked(schedule.enabled)
        self.consolidation_hours = self._double("settingsConsolidationHours", "Consolidate every (hours)", schedule.interval_hours, maximum=24 * 30.0)
        self.consolidation_hours.setMinimum(0.1)
        self.consolidation_hours.setDecimals(1)
        self.consolidation_hours.setSingleStep(0.5)
        self.consolidation_hours.setSuffix(" h")
        self.consolidation_session_end = _name(
            QtWidgets.QCheckBox("Consolidate when an agent session ends"), "settingsConsolidationSessionEnd", "Consolidate when an agent session ends"
        )
        self.consolidation_session_end.setChecked(schedule.on_session_end)
        self.consolidation_cooldown = self._spin("settingsConsolidationCooldown", "At most once per (minutes)", 0, 24 * 60, round(schedule.cooldown_minutes), " min")
        form.addRow(self.consolidation_enabled)
        form.addRow("Every", self.consolidation_hours)
        form.addRow(self.consolidation_session_end)
        form.addRow("At most once per", self.consolidation_cooldown)
        box.setEnabled(store_settings is not None)
        return box

    def _sweep_rules(self, s: StoreSettings) -> QtWidgets.QGroupBox:
        """One row per registered sweep rule: its label, what it does (tooltip) and an editor per setting it reads."""
        box = QtWidgets.QGroupBox("Auto-forget sweep rules, in the order they apply")
        box.setObjectName("settingsSweepRules")
        form = QtWidgets.QFormLayout(box)
        #: The spin box editing each rule setting, by setting key.
        self.rule_settings: dict[str, tuple[rules.RuleSetting, QtWidgets.QSpinBox | QtWidgets.QDoubleSpinBox]] = {}
        # Sweep-wide, before the rules: no rule touches a memory younger than this.
        self.grace = self._double("settingsGraceHours", "Grace period (hours)", s.grace_hours, maximum=8760.0)
        self.grace.setDecimals(1)
        self.grace.setSingleStep(1.0)
        self.grace.setSuffix(" h")
        self.grace.setToolTip("No sweep rule touches a memory younger than this (hours since it was stored)")
        form.addRow("Grace period", self.grace)
        for rule in rules.RULES:  # read when the dialog opens, so a rule registered later is listed too
            title = QtWidgets.QLabel(f"<b>{html.escape(rule.label)}</b>")
            title.setToolTip(rule.description)
            title.setObjectName(f"settingsRule_{rule.name}")
            if not rule.settings:
                note = QtWidgets.QLabel(rule.description)
                note.setWordWrap(True)
                form.addRow(title, note)
                continue
            form.addRow(title)
            for setting in rule.settings:
                name, value = "settingsRule_" + setting.key.replace(".", "_"), setting.value(s)
                spin: QtWidgets.QSpinBox | QtWidgets.QDoubleSpinBox
                if setting.integer:
                    spin = self._spin(name, setting.label, 0, int(setting.maximum), int(value), "")
                else:
                    spin = self._double(name, setting.label, value, maximum=setting.maximum)
                spin.setToolTip(rule.description)
                form.addRow(setting.label, spin)
                self.rule_settings[setting.key] = (setting, spin)
        return box

    def _spin(self, name: str, accessible: str, lo: int, hi: int, value: int, suffix: str) -> QtWidgets.QSpinBox:
        spin = _name(QtWidgets.QSpinBox(), name, accessible)
        spin.setRange(lo, hi)
        spin.setValue(max(lo, min(hi, value)))
        spin.setSuffix(suffix)
        return spin

    def _double(self, name: str, accessible: str, value: float, maximum: float = 1.0) -> QtWidgets.QDoubleSpinBox:
        spin = _name(QtWidgets.QDoubleSpinBox(), name, accessible)
        spin.setRange(0.0, maximum)
        spin.setDecimals(3)
        spin.setSingleStep(0.05)
        spin.setValue(value)
        return spin

    def _accept(self) -> None:
        try:
            self.store_changes()
        except ValueError as exc:
            self.error.setText(str(exc))
            return
        self.accept()

    def new_preferences(self) -> Preferences:
        """The person's preferences as edited."""
        return Preferences(
            refresh_seconds=self.refresh_minutes.value() * 60,
            sweep_seconds=self.sweep_minutes.value() * 60,
            sweeps_paused=self.prefs.sweeps_paused,
            consolidation_paused=self.prefs.consolidation_paused,
            live_poll_ms=self.live_ms.value(),
            theme=str(self.theme.currentData()),
            llm_base_url=self.llm_url.text().strip(),
            llm_model=self.llm_model.text().strip(),
            recent_files=list(self.prefs.recent_files),
        )

    def store_changes(self) -> dict[str, Any]:
        """The ``configure`` changes for the store (only what differs); raises ValueError for a bad rate."""
        if self.store_settings is None:
            return {}
        s = self.store_settings
        changes: dict[str, Any] = {}
        if round(self.supersede.value(), 4) != round(s.supersede_threshold, 4):
            changes["supersede_threshold"] = round(self.supersede.value(), 4)
        if round(self.advisory.value(), 4) != round(s.advisory_threshold, 4):
            changes["advisory_threshold"] = round(self.advisory.value(), 4)
        if self.advisory.value() > self.supersede.value():
            raise ValueError("The similar-to threshold must not be above the supersede threshold.")
        if round(self.grace.value(), 4) != round(s.grace_hours, 4):
            changes["grace_hours"] = round(self.grace.value(), 4)
        for setting, spin in self.rule_settings.values():
            value = round(float(spin.value()), 4)
            if value != round(setting.value(s), 4):
                for key, change in setting.change(value).items():
                    if isinstance(change, dict):
                        changes.setdefault(key, {}).update(change)
                    else:
                        changes[key] = change
        decay: dict[str, Any] = changes.pop("decay", {})
        if round(self.reinforcement.value(), 4) != round(s.decay.reinforcement, 4):
            decay["reinforcement"] = round(self.reinforcement.value(), 4)
        rates: dict[str, float] = {}
        for row in range(self.rates.rowCount()):
            type_item, rate_item = self.rates.item(row, 0), self.rates.item(row, 1)
            if type_item is None or rate_item is None:
                continue
            try:
                rate = float(rate_item.text())
            except ValueError:
                raise ValueError(f"The decay rate of {type_item.text()} must be a number, not {rate_item.text()!r}.") from None
            if not rate > 0:
                raise ValueError(f"The decay rate of {type_item.text()} must be above 0.")
            if abs(rate - s.decay.rate_for(type_item.text())) > 1e-12:
                rates[type_item.text()] = rate
        if rates:
            decay["rates"] = rates
        if decay:
            changes["decay"] = decay
        schedule = {
            "enabled": self.consolidation_enabled.isChecked(),
            "interval_hours": round(self.consolidation_hours.value(), 4),
            "on_session_end": self.consolidation_session_end.isChecked(),
            "cooldown_minutes": float(self.consolidation_cooldown.value()),
        }
        current = s.consolidation.to_dict()
        # Compared as the editors show them, so opening and saving the dialog changes nothing.
        current["interval_hours"] = round(current["interval_hours"], 1)
        current["cooldown_minutes"] = float(round(current["cooldown_minutes"]))
        schedule = {key: value for key, value in schedule.items() if value != current[key]}
        if schedule:
            changes["consolidation"] = schedule
        return changes


# --- sweep preview ---------------------------------------------------------------------------------------------


class DecisionModel(QtCore.QAbstractTableModel):
    """Sweep decisions as table rows, each cell made when the view asks for it.

    A sweep of a million-memory store can plan ten thousand decisions: items made for all of them up front (five
    QTableWidgetItems a row) held the window still for 364 ms, and a decision's reason, worked out when first read
    (see memlens.rules.base.SweepDecision), was worded for every row. Here only the rows on screen are read."""

    HEADERS = ("#", "Title", "Rule", "Action", "Why")

    def __init__(self, decisions: Sequence[Any], parent: QtCore.QObject | None = None) -> None:
        super().__init__(parent)
        self._decisions = list(decisions)

    def rowCount(self, parent: QtCore.QModelIndex | QtCore.QPersistentModelIndex = QtCore.QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self._decisions)

    def columnCount(self, parent: QtCore.QModelIndex | QtCore.QPersistentModelIndex = QtCore.QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self.HEADERS)

    def headerData(self, section: int, orientation: QtCore.Qt.Orientation, role: int = QtCore.Qt.ItemDataRole.DisplayRole) -> Any:
        if orientation == QtCore.Qt.Orientation.Horizontal and role == QtCore.Qt.ItemDataRole.DisplayRole and 0 <= section < len(self.HEADERS):
            return self.HEADERS[section]
        return None

    def data(self, index: QtCore.QModelIndex | QtCore.QPersistentModelIndex, role: int = QtCore.Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        if role in (QtCore.Qt.ItemDataRole.DisplayRole, QtCore.Qt.ItemDataRole.ToolTipRole):
            return self.text(index.row(), index.column())
        return None

    def text(self, row: int, column: int) -> str:
        """What the cell at ``row``, ``column`` shows (its tooltip says the same, for text cut at the edge)."""
        d = self._decisions[row]
        if column == 0:
            return str(d.memory_id)
        if column == 1:
            return str(d.title)
        if column == 2:
            return str(d.rule)
        if column == 3:
            return str(d.action).replace("_", " ")
        return str(d.reason)

    def memory_id(self, row: int) -> int:
        """The id of the memory the decision on ``row`` is about."""
        return int(self._decisions[row].memory_id)


class DecisionTable(QtWidgets.QTableView):
    """Sweep decisions as a table (a :class:`DecisionModel`); double-clicking a row emits the memory id."""

    memory_activated = Signal(int)

    def __init__(self, decisions: Sequence[Any], parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("sweepDecisions")
        self.setAccessibleName("Sweep decisions")
        self.decisions = DecisionModel(decisions, self)
        self.setModel(self.decisions)
        self.verticalHeader().setVisible(False)
        # Every row the same height: the view then never measures rows it does not show.
        self.verticalHeader().setSectionResizeMode(QtWidgets.QHeaderView.ResizeMode.Fixed)
        self.verticalHeader().setDefaultSectionSize(24)
        self.horizontalHeader().setStretchLastSection(True)
        self.setEditTriggers(QtWidgets.QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setWordWrap(False)
        self.setSelectionBehavior(QtWidgets.QAbstractItemView.SelectionBehavior.SelectRows)
        self.setColumnWidth(0, 60)
        self.setColumnWidth(1, 260)
        self.setColumnWidth(2, 80)
        self.setColumnWidth(3, 110)
        self.doubleClicked.connect(self._activated)

    def _activated(self, index: QtCore.QModelIndex) -> None:
        if index.isValid():
            self.memory_activated.emit(self.decisions.memory_id(index.row()))


class SweepPreviewDialog(QtWidgets.QDialog):
    """What the next sweep (or a sweep at a time-travel date) would do, decision by decision."""

    memory_activated = Signal(int)

    def __init__(self, report: Any, title: str, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("sweepPreviewDialog")
        self.setWindowTitle(title)
        self.report = report
        decisions = list(report.decisions)
        labels = {rule.name: rule.label for rule in rules.RULES}
        if decisions:
            counts = ", ".join(f"{n:,} by {labels.get(name, name).lower()}" for name, n in report.counts.items() if n)
            text = f"A sweep at {fmt.when(report.now)} would act on {fmt.plural(len(decisions), 'memory', 'memories')} ({counts}). Nothing has been changed."
        else:
            text = f"A sweep at {fmt.when(report.now)} would change nothing."
        head = QtWidgets.QLabel(text)
        head.setObjectName("sweepPreviewSummary")
        head.setWordWrap(True)
        # Every registered rule with what it would do, so a rule that takes nothing is seen to have been applied.
        legend = "".join(
            f"<li><b>{html.escape(rule.label)}</b> ({report.counts.get(rule.name, 0):,}): {html.escape(rule.description)}</li>" for rule in rules.RULES
        )
        self.rules = QtWidgets.QLabel(f"<ul style='margin:0'>{legend}</ul>")
        self.rules.setObjectName("sweepPreviewRules")
        self.rules.setAccessibleName("Sweep rules")
        self.rules.setWordWrap(True)
        self.table = DecisionTable(decisions)
        self.table.memory_activated.connect(self.memory_activated)
        buttons = QtWidgets.QDialogButtonBox(QtWidgets.QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        layout = QtWidgets.QVBoxLayout(self)
        layout.addWidget(head)
        layout.addWidget(self.rules)
        layout.addWidget(self.table, 1)
        layout.addWidget(buttons)
        self.resize(820, 460)


# --- time travel -----------------------------------------------------------------------------------------------


class TimeTravelDialog(QtWidgets.QDialog):
    """Pick a future date to preview the store at."""

    def __init__(self, now: datetime, current: datetime | None, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("timeTravelDialog")
        self.setWindowTitle("Preview the store at a later date")
        start = current or now
        self.edit = _name(QtWidgets.QDateTimeEdit(QtCore.QDateTime.fromSecsSinceEpoch(int(start.timestamp()))), "timeTravelDate", "Date")
        self.edit.setCalendarPopup(True)
        self.edit.setDisplayFormat("yyyy-MM-dd HH:mm")
        self.edit.setMinimumDateTime(QtCore.QDateTime.fromSecsSinceEpoch(int(now.timestamp())))
        note = QtWidgets.QLabel("The store is shown as it will be then: faded strengths, expired TTLs, and what a sweep would forget. Nothing is changed.")
        note.setWordWrap(True)
        buttons = QtWidgets.QDialogButtonBox(QtWidgets.QDialogButtonBox.StandardButton.Ok | QtWidgets.QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout = QtWidgets.QVBoxLayout(self)
        layout.addWidget(note)
        layout.addWidget(self.edit)
        layout.addWidget(buttons)

    def value(self) -> datetime:
        """The chosen moment (aware, UTC)."""
        return datetime.fromtimestamp(self.edit.dateTime().toSecsSinceEpoch(), tz=timezone.utc)


def show_about(parent: QtWidgets.QWidget, store: object) -> None:
    """Help > About: the version, what memlens is for, and the open store (``store``, None for none)."""
    from memlens import __version__

    QtWidgets.QMessageBox.about(
        parent,
        "About memlens",
        f"<b>memlens {__version__}</b><p>See, curate and forget what your AI agent remembers.</p><p>Store: {html.escape(str(store or 'none'))}</p>",
    )
