"""The detail pane: one memory's content, metadata, provenance, explanation, version chain and strength.

:func:`load_detail` gathers everything on the reader thread; :class:`DetailPane` only renders it. Links inside
the pane use ``memory:ID`` and ``session:ID`` URLs and are handed to the window, which navigates.
"""

from __future__ import annotations

import html
import itertools
import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from memlens.dates import in_local_zone, resolve
from memlens.decay import strength
from memlens.errors import NotFound
from memlens.gui import format as fmt
from memlens.gui.diff import diff_html
from memlens.gui.icons import icon
from memlens.gui.qt import QtCore, QtWidgets, Signal
from memlens.gui.strength_chart import CurveData, StrengthChart
from memlens.models import Memory
from memlens.store import AuditEntry, MemoryStore, Relation, Session
from memlens.text import highlight_spans, query_terms


@dataclass(frozen=True)
class DetailData:
    """A memory and everything the detail pane shows about it, read in one go."""

    memory: Memory
    history: list[Memory]
    relations: list[Relation]
    linked: dict[int, Memory]
    sources: list[int]
    access_times: list[datetime]
    explanation: str
    strength: float
    fades_at: datetime | None
    curve: CurveData | None
    audit: list[AuditEntry]
    session: Session | None
    now: datetime
    query_text: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    #: For each version after the first (by id): the relations that followed it from the version it superseded.
    carried: dict[int, list[Relation]] = field(default_factory=dict)


def curve_window(memory: Memory, fades: datetime | None, now: datetime) -> tuple[datetime, datetime]:
    """The time span a strength chart shows: from creation to past the fade date, TTL and now (at least a week)."""
    start = memory.created_at
    end = now + timedelta(days=7)
    if fades is not None and fades > now:
        end = max(end, fades + (fades - start) * 0.08)
    if memory.forget_after is not None:
        end = max(end, memory.forget_after + timedelta(days=1))
    end = min(end, now + timedelta(days=3 * 365))
    if end <= start:
        end = start + timedelta(days=1)
    return start, end


def load_curve(store: MemoryStore, memory: Memory, now: datetime) -> CurveData:
    """One memory's strength curve and fade date (runs on the reader thread)."""
    threshold = store.settings.decay.forget_threshold
    fades = store.fades_at(memory.id)
    start, end = curve_window(memory, fades, now)
    curve = store.strength_curve(memory.id, start=start, end=end, points=240, now=now)
    return CurveData(memory, curve, fades, threshold, now)


def load_detail(store: MemoryStore, memory_id: int, now: datetime, query_text: str = "") -> DetailData:
    """Everything the detail pane shows about ``memory_id`` (runs on the reader thread; raises NotFound)."""
    memory = store.get(memory_id)
    relations = store.relations(memory_id)
    sources = store.sources_of(memory_id)
    wanted = {r.src_id for r in relations} | {r.dst_id for r in relations} | set(sources)
    if memory.parent_id:
        wanted.add(memory.parent_id)
    wanted.discard(memory_id)
    linked = {m.id: m for m in store.get_many(sorted(wanted))}
    session = None
    if memory.session_id:
        try:
            session = store.session(memory.session_id)
        except LookupError:
            session = None
    history = store.history(memory_id)
    return DetailData(
        memory=memory,
        history=history,
        relations=relations,
        linked=linked,
        sources=sources,
        access_times=store.access_times(memory_id),
        explanation=store.explain(memory_id, now=now),
        strength=strength(memory, now, store.settings.decay),
        fades_at=store.fades_at(memory_id),
        curve=load_curve(store, memory, now),
        audit=store.audit(target_id=memory_id, limit=25),
        session=session,
        now=now,
        query_text=query_text,
        carried={newer.id: store.carried_relations(older.id, newer.id) for older, newer in itertools.pairwise(history)},
    )


def forgotten_message(store: MemoryStore, memory_id: int, now: datetime) -> str:
    """HTML saying when, by whom and why ``memory_id`` was erased, in the words of :meth:`MemoryStore.explain` (reader thread)."""
    try:
        said = store.explain(memory_id, now=now)
    except NotFound:
        return (
            f"There is no memory #{memory_id}. The audit log has no forget entry naming it: it was never stored here, or "
            "it was erased in a bulk operation whose entry records only a count."
        )
    return f"Memory #{memory_id} was forgotten on purpose: {html.escape(said)} Its text is gone; the audit log keeps a hash of it."


def highlighted(text: str, query_text: str) -> str:
    """``text`` as HTML with the query's matching words marked."""
    spans = highlight_spans(text, query_terms(query_text)) if query_text.strip() else []
    out: list[str] = []
    pos = 0
    for start, end in spans:
        out.append(html.escape(text[pos:start]))
        out.append(f"<span style='background-color:rgba(255,200,0,0.45);font-weight:600'>{html.escape(text[start:end])}</span>")
        pos = end
    out.append(html.escape(text[pos:]))
    return "".join(out).replace("\n", "<br>")


def _link(memory_id: int, linked: dict[int, Memory]) -> str:
    m = linked.get(memory_id)
    if m is None:
        return f"#{memory_id} <i>(forgotten)</i>"
    return f"<a href='memory:{memory_id}'>#{memory_id}</a> {html.escape(m.title[:80])}"


def _row(label: str, value: str) -> str:
    return f"<tr><td style='padding:1px 14px 1px 0;vertical-align:top;white-space:nowrap'><b>{html.escape(label)}</b></td><td>{value}</td></tr>"


def _written_note(entry: AuditEntry) -> str:
    """Under an entry run at a simulated time, when it was really written (its time column shows the "as of")."""
    full = fmt.audit_time(entry)
    return f"<br><small>{html.escape(full[full.index('(') :])}</small>" if full != fmt.when(entry.at) else ""


def grounded_dates_html(memory: Memory) -> str:
    """The relative time expressions of a memory's text and the dates they name, counted from when it was written
    (as search indexes them): ``“yesterday” → Wed 1 Feb 2023``, one a line; empty when there are none."""
    found = resolve(memory.content, in_local_zone(memory.created_at))
    return "<br>".join(f"“{html.escape(r.phrase)}” → {html.escape(r.describe())}" for r in found)


def memory_html(data: DetailData) -> str:
    """The Memory tab: content, explanation, metadata, provenance and audit trail as HTML."""
    m = data.memory
    now = data.now
    parts = [f"<div style='font-size:11pt;line-height:140%'>{highlighted(m.content, data.query_text)}</div>"]
    if data.explanation:
        parts.append("<h4>In plain words</h4>")
        parts.append("<p>" + html.escape(data.explanation).replace("\n", "<br>") + "</p>")
    rows = [
        _row("Layer / type", f"{html.escape(m.layer)} / {html.escape(m.type)}"),
        _row("Project", html.escape(m.project or "-")),
        _row("Tags", html.escape(", ".join(m.tags) or "-")),
        _row("Importance", f"{m.importance:.2f}"),
        _row("Strength", f"{data.strength:.3f} at {fmt.when(now)}"),
        _row("Created", f"{fmt.when(m.created_at)} ({fmt.relative(m.created_at, now)})"),
        *([_row("Dates", dates)] if (dates := grounded_dates_html(m)) else []),
        _row("Last used", f"{fmt.when(m.last_accessed_at)} ({fmt.relative(m.last_accessed_at, now)}), recalled {fmt.plural(m.access_count, 'time')}"),
        _row("Version", f"{m.version} of chain #{m.chain_id}" + ("" if m.is_latest else " - <b>superseded</b>")),
        _row("Pinned", "yes - no sweep touches it" if m.pinned else "no"),
    ]
    if m.forget_after is not None:
        state = "expired" if m.is_expired(now) else "expires"
        rows.append(_row("TTL", f"{state} {fmt.when(m.forget_after)} ({fmt.relative(m.forget_after, now)})"))
    if data.fades_at is not None:
        rows.append(_row("Fades", f"below the forget threshold {fmt.when(data.fades_at)} ({fmt.relative(data.fades_at, now)})"))
    parts.append("<h4>Details</h4><table cellspacing='0'>" + "".join(rows) + "</table>")

    prov = [_row("Origin", html.escape(m.origin))]
    if m.session_id:
        extra = ""
        if data.session is not None:
            extra = f" - started {fmt.when(data.session.started_at)}" + (", ended" if data.session.ended_at else ", still open")
        prov.append(_row("Session", f"<a href='session:{html.escape(m.session_id)}'>{html.escape(m.session_id)}</a>{extra}"))
    if m.source_ref:
        prov.append(_row("Source", html.escape(m.source_ref)))
    if data.sources:
        prov.append(_row("Derived from", "<br>".join(_link(i, data.linked) for i in data.sources)))
    if m.parent_id:
        sim = f" (similarity {m.supersede_similarity:.2f})" if m.supersede_similarity is not None else ""
        prov.append(_row("Supersedes", _link(m.parent_id, data.linked) + sim))
    for r in data.relations:
        if r.kind in ("derives",) and r.src_id == m.id:
            continue
        if r.kind == "supersedes" and r.src_id == m.id and r.dst_id == m.parent_id:
            continue
        other = r.dst_id if r.src_id == m.id else r.src_id
        direction = {"supersedes": ("supersedes", "superseded by"), "derives": ("derived from", "source of")}.get(r.kind, (r.kind, r.kind))
        label = direction[0] if r.src_id == m.id else direction[1]
        score = f" ({r.score:.2f})" if r.score is not None else ""
        prov.append(_row(label.capitalize(), _link(other, data.linked) + score))
    parts.append("<h4>Provenance</h4><table cellspacing='0'>" + "".join(prov) + "</table>")

    if m.metadata:
        meta = json.dumps(m.metadata, ensure_ascii=False, indent=2, default=str)
        if len(meta) > 6000:
            meta = meta[:6000] + "\n…"
        parts.append(f"<h4>Metadata</h4><pre style='white-space:pre-wrap'>{html.escape(meta)}</pre>")
    if data.audit:
        lines = "".join(
            f"<tr><td style='padding-right:10px;white-space:nowrap'>{fmt.when(e.as_of)}</td><td style='padding-right:10px'>{html.escape(e.actor)}</td>"
            f"<td>{html.escape(fmt.audit_summary(e))}{_written_note(e)}</td></tr>"
            for e in data.audit
        )
        parts.append(f"<h4>Audit trail</h4><table cellspacing='0'>{lines}</table>")
    return "".join(parts)


def _carried_html(newer: Memory, moved: list[Relation]) -> str:
    """One line naming the links that followed ``newer`` from the version it superseded (empty when none did)."""
    if not moved:
        return ""
    names = {"derives": ("derived from", "source of"), "extends": ("extends", "extended by")}
    parts = []
    for r in moved:
        outgoing = r.src_id == newer.id
        other = r.dst_id if outgoing else r.src_id
        label = names.get(r.kind, (r.kind, r.kind))[0 if outgoing else 1]
        parts.append(f"{html.escape(label)} <a href='memory:{other}'>#{other}</a>")
    return f"<p><i>Links that moved to v{newer.version}:</i> " + ", ".join(parts) + "</p>"


def versions_html(history: list[Memory], selected_id: int, carried: dict[int, list[Relation]] | None = None) -> str:
    """Every neighbouring pair of versions as a word diff, with the similarity that caused each supersede and the
    links that followed the new version (``carried``, by the newer version's id)."""
    if len(history) < 2:
        return "<p>This memory has a single version: nothing has superseded it.</p>"
    parts = []
    for older, newer in itertools.pairwise(history):
        sim = f"similarity {newer.supersede_similarity:.2f}" if newer.supersede_similarity is not None else "similarity not recorded"
        mark = " style='background-color:rgba(47,111,176,0.12)'" if selected_id in (older.id, newer.id) else ""
        parts.append(
            f"<div{mark}><p><b>v{older.version} → v{newer.version}</b> "
            f"(<a href='memory:{older.id}'>#{older.id}</a> → <a href='memory:{newer.id}'>#{newer.id}</a>, "
            f"{fmt.when(newer.created_at)}; {sim})</p>"
            f"<p style='line-height:140%'>{diff_html(older.content, newer.content)}</p>"
            f"{_carried_html(newer, (carried or {}).get(newer.id, []))}</div><hr>"
        )
    return "".join(parts)


class DetailPane(QtWidgets.QWidget):
    """Shows one memory (see :class:`DetailData`); emits what the person asks for."""

    link_activated = Signal(str, str)  # kind ("memory", "session"), value
    edit_requested = Signal()
    pin_requested = Signal(bool)
    forget_requested = Signal()

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("detailPane")
        self.data: DetailData | None = None
        self.read_only = False

        self.title = QtWidgets.QLabel("No memory selected")
        self.title.setObjectName("detailTitle")
        self.title.setWordWrap(True)
        self.title.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
        self.badges = QtWidgets.QLabel()
        self.badges.setObjectName("detailBadges")
        self.badges.setTextFormat(QtCore.Qt.TextFormat.RichText)
        self.badges.setWordWrap(True)  # on its own line and wrapped: beside the buttons a narrow pane cut it off

        self.edit_button = self._button("Edit…", "edit", "detailEdit", "Edit importance, tags and pinning")
        self.pin_button = self._button("Pin", "pin", "detailPin", "Pinned memories keep their strength and are never swept")
        self.pin_button.setCheckable(True)
        self.forget_button = self._button("Forget…", "forget", "detailForget", "Erase this memory for good")
        self.edit_button.clicked.connect(self.edit_requested)
        self.pin_button.clicked.connect(lambda checked: self.pin_requested.emit(bool(checked)))
        self.forget_button.clicked.connect(self.forget_requested)

        buttons = QtWidgets.QHBoxLayout()
        buttons.addStretch(1)
        buttons.addWidget(self.edit_button)
        buttons.addWidget(self.pin_button)
        buttons.addWidget(self.forget_button)

        self.browser = self._browser("detailBrowser", "Memory details")
        self.version_list = QtWidgets.QListWidget()
        self.version_list.setObjectName("versionList")
        self.version_list.setAccessibleName("Versions")
        self.version_list.itemClicked.connect(self._version_clicked)
        self.version_list.itemActivated.connect(self._version_clicked)
        self.version_list.setHorizontalScrollBarPolicy(QtCore.Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.version_list.setTextElideMode(QtCore.Qt.TextElideMode.ElideRight)
        self.diff_browser = self._browser("diffBrowser", "Differences between versions")
        versions = QtWidgets.QSplitter(QtCore.Qt.Orientation.Vertical)
        versions.setObjectName("versionSplitter")
        versions.addWidget(self.version_list)
        versions.addWidget(self.diff_browser)
        versions.setSizes([110, 430])
        self.chart = StrengthChart()

        self.tabs = QtWidgets.QTabWidget()
        self.tabs.setObjectName("detailTabs")
        self.tabs.setDocumentMode(True)
        self.tabs.addTab(self.browser, "Memory")
        self.tabs.addTab(versions, "Versions")
        self.tabs.addTab(self.chart, "Strength")

        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(8, 6, 8, 6)
        layout.addWidget(self.title)
        layout.addWidget(self.badges)
        layout.addLayout(buttons)
        layout.addWidget(self.tabs, 1)
        self.clear()

    def _button(self, text: str, icon_name: str, name: str, tip: str) -> QtWidgets.QToolButton:
        button = QtWidgets.QToolButton()
        button.setText(text)
        button.setIcon(icon(icon_name))
        button.setToolButtonStyle(QtCore.Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        button.setObjectName(name)
        button.setAccessibleName(text.rstrip("…"))
        button.setToolTip(tip)
        return button

    def _browser(self, name: str, accessible: str) -> QtWidgets.QTextBrowser:
        browser = QtWidgets.QTextBrowser()
        browser.setObjectName(name)
        browser.setAccessibleName(accessible)
        browser.setOpenLinks(False)
        browser.anchorClicked.connect(self._anchor)
        return browser

    def _anchor(self, url: QtCore.QUrl) -> None:
        text = url.toString()
        kind, _, value = text.partition(":")
        if kind in ("memory", "session") and value:
            self.link_activated.emit(kind, value)

    def _version_clicked(self, item: QtWidgets.QListWidgetItem) -> None:
        memory_id = item.data(QtCore.Qt.ItemDataRole.UserRole)
        if isinstance(memory_id, int) and (self.data is None or memory_id != self.data.memory.id):
            self.link_activated.emit("memory", str(memory_id))

    def set_read_only(self, read_only: bool) -> None:
        """Disable the editing buttons (time travel)."""
        self.read_only = read_only
        self._update_buttons()

    def _update_buttons(self) -> None:
        has = self.data is not None
        for button in (self.edit_button, self.pin_button, self.forget_button):
            button.setEnabled(has and not self.read_only)

    def clear(self, message: str = "Select a memory to see it here.") -> None:
        """Show no memory."""
        self.data = None
        self.title.setText("No memory selected")
        self.badges.setText("")
        self.browser.setHtml(f"<p style='color:gray'>{html.escape(message)}</p>")
        self.version_list.clear()
        self.diff_browser.clear()
        self.chart.clear()
        self.pin_button.setChecked(False)
        self._update_buttons()

    def show_missing(self, memory_id: int, message: str) -> None:
        """Say that ``memory_id`` is gone (forgotten), with what the audit log knows."""
        self.clear()
        self.title.setText(f"#{memory_id} is no longer stored")
        self.browser.setHtml(f"<p>{message}</p>")

    def show_data(self, data: DetailData, *, show_curve: bool = True) -> None:
        """Render a loaded memory, keeping the current tab and scroll position when it is the same memory.

        ``show_curve=False`` leaves the Strength tab alone (it is comparing several selected memories)."""
        same = self.data is not None and self.data.memory.id == data.memory.id
        scroll = self.browser.verticalScrollBar().value() if same else 0
        self.data = data
        m = data.memory
        self.title.setText(f"#{m.id}  {m.title}")
        badges = [m.layer, m.type]
        if m.project:
            badges.append(m.project)
        badges.append(f"v{m.version}" + ("" if m.is_latest else " · superseded"))
        if m.pinned:
            badges.append("pinned")
        if m.is_expired(data.now):
            badges.append("expired")
        self.badges.setText(" ".join(f"<span style='background-color:rgba(127,127,127,0.20)'>&nbsp;{html.escape(b)}&nbsp;</span>" for b in badges))
        self.browser.setHtml(memory_html(data))
        self.browser.verticalScrollBar().setValue(scroll)
        self.pin_button.setChecked(m.pinned)
        self.pin_button.setText("Pinned" if m.pinned else "Pin")
        self._fill_versions(data)
        if data.curve is not None and show_curve:
            self.chart.show_curves([data.curve])
        self._update_buttons()

    def _fill_versions(self, data: DetailData) -> None:
        self.version_list.blockSignals(True)
        self.version_list.clear()
        for v in data.history:
            sim = f" · similarity {v.supersede_similarity:.2f}" if v.supersede_similarity is not None else ""
            state = "latest" if v.is_latest else "superseded"
            item = QtWidgets.QListWidgetItem(f"v{v.version}  #{v.id}  {fmt.when(v.created_at)}  ({state}{sim})  {v.title[:70]}")
            item.setData(QtCore.Qt.ItemDataRole.UserRole, v.id)
            item.setToolTip(v.content[:500])
            self.version_list.addItem(item)
            if v.id == data.memory.id:
                item.setSelected(True)
                self.version_list.setCurrentItem(item)
        self.version_list.blockSignals(False)
        self.diff_browser.setHtml(versions_html(data.history, data.memory.id, data.carried))
