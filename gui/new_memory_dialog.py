"""Write a memory with a supersede preview: before saving, see what it would supersede and why.

As the person types (debounced), ``MemoryStore.preview_supersede`` runs on the planning reader's thread
(:attr:`memlens.gui.tasks.StoreReader.planner`) and the dialog shows the decision ``remember`` would make: the memory
it would supersede, or the advisory "similar to" match, the similarity against the threshold, and the shared and
differing words highlighted on both sides. Then: save (as decided), save as a separate memory (no supersede), save
a "similar" match as its new version anyway, or cancel. A new version without a project of its own joins its
chain's project, and the preview says so.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from memlens.gui.diff import ONLY_NEW_STYLE, ONLY_OLD_STYLE, SHARED_STYLE, overlap_styles, token_highlight_html
from memlens.gui.qt import QtCore, QtGui, QTimer, QtWidgets, Signal
from memlens.gui.tasks import StoreReader
from memlens.models import KNOWN_TYPES
from memlens.store import MemoryStore, SupersedePreview

DEBOUNCE_MS = 300


@dataclass(frozen=True)
class Candidate:
    """What the person wants to store."""

    content: str
    type: str
    project: str | None
    tags: tuple[str, ...]
    supersede: bool
    #: The memory to supersede whatever the similarity (the person chose "save as new version" for a match).
    supersede_id: int | None = None


class SimilarityBar(QtWidgets.QWidget):
    """A bar for the similarity with tick marks at the similar-to and supersede thresholds."""

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("similarityBar")
        self.setAccessibleName("Similarity against the thresholds")
        self.similarity = 0.0
        self.threshold = 0.7
        self.advisory = 0.4
        self.setMinimumHeight(22)

    def set_values(self, similarity: float, threshold: float, advisory: float) -> None:
        """Show ``similarity`` against the two thresholds."""
        self.similarity, self.threshold, self.advisory = similarity, threshold, advisory
        self.setToolTip(f"similarity {similarity:.2f}; supersedes above {threshold:.2f}, similar-to above {advisory:.2f}")
        self.update()

    def paintEvent(self, _event: QtGui.QPaintEvent) -> None:
        p = QtGui.QPainter(self)
        p.setRenderHint(QtGui.QPainter.RenderHint.Antialiasing)
        r = self.rect().adjusted(1, 4, -1, -4)
        pal = self.palette()
        p.setPen(QtGui.QPen(pal.color(QtGui.QPalette.ColorRole.Mid)))
        p.setBrush(pal.color(QtGui.QPalette.ColorRole.Base))
        p.drawRoundedRect(r, 4, 4)
        fill = QtCore.QRectF(r.x(), r.y(), r.width() * max(0.0, min(1.0, self.similarity)), r.height())
        color = "#c0392b" if self.similarity > self.threshold else ("#d9a20d" if self.similarity > self.advisory else "#2e9d5b")
        p.setBrush(QtGui.QColor(color))
        p.setPen(QtCore.Qt.PenStyle.NoPen)
        p.drawRoundedRect(fill, 4, 4)
        p.setPen(QtGui.QPen(pal.color(QtGui.QPalette.ColorRole.Text), 2))
        for value in (self.advisory, self.threshold):
            x = r.x() + r.width() * value
            p.drawLine(QtCore.QPointF(x, r.y() - 3), QtCore.QPointF(x, r.bottom() + 3))
        p.end()


class NewMemoryDialog(QtWidgets.QDialog):
    """The supersede preview dialog. ``candidate()`` holds the choice after ``accept``."""

    previewed = Signal(object)  # the SupersedePreview shown (None when the text is empty)

    def __init__(
        self,
        reader: StoreReader,
        now: Callable[[], datetime],
        projects: list[str],
        default_project: str | None = None,
        parent: QtWidgets.QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("newMemoryDialog")
        self.setWindowTitle("New memory")
        self._reader = reader
        self._now = now
        self.preview: SupersedePreview | None = None
        self._choice: bool | None = None

        self.text = QtWidgets.QPlainTextEdit()
        self.text.setObjectName("candidateText")
        self.text.setAccessibleName("Memory text")
        self.text.setPlaceholderText("Write or paste the memory, e.g. “The project installs dependencies with pnpm”.")
        self.type = QtWidgets.QComboBox()
        self.type.setObjectName("candidateType")
        self.type.setAccessibleName("Type")
        self.type.setEditable(True)
        for t in ("fact", "preference", "decision", "pattern", "workflow", "lesson", "bug", "task"):
            self.type.addItem(t)
        for t in KNOWN_TYPES:
            if self.type.findText(t) < 0 and t not in ("observation", "summary", "archive"):
                self.type.addItem(t)
        self.project = QtWidgets.QComboBox()
        self.project.setObjectName("candidateProject")
        self.project.setAccessibleName("Project")
        self.project.setEditable(True)
        self.project.addItem("")
        self.project.addItems(projects)
        self.project.setCurrentText(default_project or "")
        self.tags = QtWidgets.QLineEdit()
        self.tags.setObjectName("candidateTags")
        self.tags.setAccessibleName("Tags")
        self.tags.setPlaceholderText("comma-separated (optional)")

        self.decision = QtWidgets.QLabel("Type the memory to see what storing it would do.")
        self.decision.setObjectName("previewDecision")
        self.decision.setWordWrap(True)
        self.decision.setTextFormat(QtCore.Qt.TextFormat.RichText)
        self.bar = SimilarityBar()
        self.candidate_view = QtWidgets.QTextBrowser()
        self.candidate_view.setObjectName("previewCandidate")
        self.candidate_view.setAccessibleName("New text, words highlighted")
        self.target_view = QtWidgets.QTextBrowser()
        self.target_view.setObjectName("previewTarget")
        self.target_view.setAccessibleName("Existing memory, words highlighted")
        legend = QtWidgets.QLabel(
            f"<span style='{SHARED_STYLE}'>&nbsp;shared words&nbsp;</span> &nbsp; "
            f"<span style='{ONLY_NEW_STYLE}'>&nbsp;only in the new text&nbsp;</span> &nbsp; "
            f"<span style='{ONLY_OLD_STYLE}'>&nbsp;only in the existing memory&nbsp;</span>"
        )
        sides = QtWidgets.QHBoxLayout()
        left = QtWidgets.QVBoxLayout()
        left.addWidget(QtWidgets.QLabel("New text"))
        left.addWidget(self.candidate_view)
        right = QtWidgets.QVBoxLayout()
        self.target_label = QtWidgets.QLabel("Existing memory")
        right.addWidget(self.target_label)
        right.addWidget(self.target_view)
        sides.addLayout(left)
        sides.addLayout(right)

        self.buttons = QtWidgets.QDialogButtonBox()
        self.save_button = self.buttons.addButton("Save", QtWidgets.QDialogButtonBox.ButtonRole.AcceptRole)
        self.save_button.setObjectName("saveButton")
        self.separate_button = self.buttons.addButton("Save as separate memory", QtWidgets.QDialogButtonBox.ButtonRole.ActionRole)
        self.separate_button.setObjectName("saveSeparateButton")
        self.version_button = self.buttons.addButton("Save as new version", QtWidgets.QDialogButtonBox.ButtonRole.ActionRole)
        self.version_button.setObjectName("saveAsVersionButton")
        self.version_button.setAccessibleName("Save as a new version of the similar memory")
        self.version_button.clicked.connect(self._finish_as_version)
        self._forced_id: int | None = None
        cancel = self.buttons.addButton(QtWidgets.QDialogButtonBox.StandardButton.Cancel)
        cancel.setObjectName("cancelButton")
        self.save_button.clicked.connect(lambda: self._finish(True))
        self.separate_button.clicked.connect(lambda: self._finish(False))
        cancel.clicked.connect(self.reject)

        form = QtWidgets.QFormLayout()
        row = QtWidgets.QHBoxLayout()
        row.addWidget(QtWidgets.QLabel("Type"))
        row.addWidget(self.type, 1)
        row.addWidget(QtWidgets.QLabel("Project"))
        row.addWidget(self.project, 1)
        row.addWidget(QtWidgets.QLabel("Tags"))
        row.addWidget(self.tags, 1)
        form.addRow(row)
        layout = QtWidgets.QVBoxLayout(self)
        layout.addWidget(self.text, 2)
        layout.addLayout(form)
        layout.addWidget(self.decision)
        layout.addWidget(self.bar)
        layout.addWidget(legend)
        layout.addLayout(sides, 3)
        layout.addWidget(self.buttons)

        self._debounce = QTimer(self)
        self._debounce.setObjectName("previewDebounce")
        self._debounce.setSingleShot(True)
        self._debounce.setInterval(DEBOUNCE_MS)
        self._debounce.timeout.connect(self._run_preview)
        self.text.textChanged.connect(self._debounce.start)
        self.type.currentTextChanged.connect(self._debounce.start)
        self.project.currentTextChanged.connect(self._debounce.start)
        self._update_buttons()
        self.resize(900, 640)

    def set_text(self, text: str) -> None:
        """Fill in the text (a paste); the preview follows after the debounce."""
        self.text.setPlainText(text)

    def _fields(self) -> tuple[str, str, str | None]:
        return self.text.toPlainText(), (self.type.currentText().strip() or "fact"), (self.project.currentText().strip() or None)

    def _run_preview(self) -> None:
        content, type_, project = self._fields()
        if not content.strip():
            self._show(None)
            return
        now = self._now()

        def preview(store: MemoryStore) -> SupersedePreview:
            return store.preview_supersede(content, project=project, type=type_, now=now)

        self._reader.submit("supersede-preview", preview, self._show, self._failed)

    def _failed(self, error: BaseException) -> None:
        self.preview = None
        self.decision.setText(f"<span style='color:#c0392b'>{html.escape(str(error))}</span>")
        self._update_buttons()
        self.previewed.emit(None)

    def _show(self, preview: SupersedePreview | None) -> None:
        self.preview = preview
        content = self.text.toPlainText()
        if preview is None:
            self.decision.setText("Type the memory to see what storing it would do.")
            self.bar.set_values(0.0, 0.7, 0.4)
            self.candidate_view.clear()
            self.target_view.clear()
        else:
            self.bar.set_values(preview.similarity, preview.threshold, preview.advisory_threshold)
            target = preview.target
            if preview.action == "supersede" and target is not None:
                self.decision.setText(
                    f"<b>Supersedes #{target.id}</b> (v{target.version}, {self._project_words(target.project)}): similarity "
                    f"<b>{preview.similarity:.2f}</b> is above the threshold {preview.threshold:.2f}. Saving makes this version "
                    f"{target.version + 1} of that memory{self._joins(target.project)}; the old version is kept, out of search."
                )
            elif preview.action == "similar" and target is not None:
                self.decision.setText(
                    f"<b>Similar to #{target.id}</b> ({self._project_words(target.project)}): similarity {preview.similarity:.2f} is "
                    f"above {preview.advisory_threshold:.2f} but not above the supersede threshold {preview.threshold:.2f}. It will be "
                    "stored separately and linked as related, unless you save it as a new version of that memory."
                )
            else:
                self.decision.setText(
                    f"<b>New memory</b>: nothing in this layer and project is more than {preview.advisory_threshold:.2f} similar."
                )
            self.candidate_view.setHtml(token_highlight_html(content, overlap_styles(preview.shared, preview.only_new, ONLY_NEW_STYLE)))
            if target is not None:
                self.target_label.setText(f"Existing memory #{target.id} (v{target.version})")
                self.target_view.setHtml(token_highlight_html(target.content, overlap_styles(preview.shared, preview.only_old, ONLY_OLD_STYLE)))
            else:
                self.target_label.setText("Existing memory")
                self.target_view.setHtml("<p style='color:gray'>No similar memory.</p>")
        self._update_buttons()
        self.previewed.emit(preview)

    @staticmethod
    def _project_words(project: str | None) -> str:
        return f"project <b>{html.escape(project)}</b>" if project else "no project"

    def _joins(self, project: str | None) -> str:
        """What happens to the project: a new version without one of its own stays in its chain's project."""
        if project and self._fields()[2] is None:
            return f", in its project <b>{html.escape(project)}</b>"
        return ""

    def _update_buttons(self) -> None:
        p = self.preview
        has_text = bool(self.text.toPlainText().strip())
        self.save_button.setEnabled(has_text and p is not None)
        if p is not None and p.target is not None and p.action == "supersede":
            self.save_button.setText(f"Save as new version of #{p.target.id}")
        elif p is not None and p.target is not None and p.action == "similar":
            self.save_button.setText("Save (linked as similar)")
        else:
            self.save_button.setText("Save")
        self.separate_button.setVisible(p is not None and p.action == "supersede")
        self.separate_button.setEnabled(has_text)
        similar = p is not None and p.target is not None and p.action == "similar"
        self.version_button.setVisible(similar)
        self.version_button.setEnabled(has_text and similar)
        if similar and p is not None and p.target is not None:
            self.version_button.setText(f"Save as new version of #{p.target.id}")

    def _finish(self, supersede: bool) -> None:
        self._choice = supersede
        self._forced_id = None
        self.accept()

    def _finish_as_version(self) -> None:
        p = self.preview
        if p is None or p.target is None:
            return
        self._choice = True
        self._forced_id = p.target.id
        self.accept()

    def candidate(self) -> Candidate:
        """What to store and whether supersede detection applies (False for "save as separate memory").

        When the text becomes a new version (as previewed, or chosen for a "similar" match) and no project was
        given, it takes the project of the chain it joins, so project-scoped searches still find the fact."""
        content, type_, project = self._fields()
        tags = tuple(t.strip() for t in self.tags.text().split(",") if t.strip())
        supersede = bool(self._choice) if self._choice is not None else True
        p = self.preview
        joins = p is not None and p.target is not None and supersede and (p.action == "supersede" or self._forced_id is not None)
        if joins and project is None and p is not None and p.target is not None:
            project = p.target.project
        return Candidate(content, type_, project, tags, supersede, self._forced_id)
