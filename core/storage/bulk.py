"""Writing many new memories at once: the rows prepared ahead (in a worker process for big loads), the full-text
rows written by ``executemany`` instead of by the per-row trigger.

Both bulk paths use it: :meth:`memlens.storage.memories.MemoryRepository.remember_many` and
:meth:`memlens.storage.transfer.TransferRepository.import_records`. What they write is exactly what the one-row
path writes (the equivalence tests in ``tests/test_import_fast.py`` compare the two); only the cost differs:

- ``memories_fts_insert`` makes FTS5 flush its pending terms after every row (each trigger runs in a statement
  savepoint), about 50 µs a row; the same rows given to FTS5 by one ``executemany`` cost a third of that. So inside
  the caller's write transaction the trigger is dropped, the rows and their FTS rows inserted, and the trigger
  created again from its own stored SQL (:func:`insert_new`). Schema changes are transactional in SQLite: a
  rollback or a crash at any point leaves the trigger exactly as it was, and no other connection ever sees the
  store without it.
- Preparing a record (redaction, checks, similarity tokens, the text FTS5 indexes) is pure Python and needs
  nothing of the store, so for a big load it runs in a worker process one batch ahead of the writer
  (:func:`prepared_in_order`): the second core prepares while the first writes.
"""

from __future__ import annotations

import collections
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import IO, TYPE_CHECKING, Any, NamedTuple, TypeVar

if TYPE_CHECKING:
    import queue

from memlens import db
from memlens.postgres import is_postgres
from memlens.storage.context import to_json
from memlens.text import index_text, token_key

T = TypeVar("T")
R = TypeVar("R")

#: The trigger that indexes a new row in ``memory_fts`` (see :mod:`memlens.schema`).
FTS_INSERT_TRIGGER = "memories_fts_insert"
#: The trigger that re-indexes a row whose indexed columns change: dropped too while new rows get their context.
FTS_UPDATE_TRIGGER = "memories_fts_update"
#: The columns in the order of an FTS row as the bulk writers build it: the context, known last, at the end.
_FTS_INSERT = "INSERT INTO memory_fts(rowid, title, content, tags, dates, context) VALUES (?, ?, ?, ?, ?, ?)"
#: Loads smaller than this are prepared in this process: starting a worker costs a few tenths of a second.
PARALLEL_MIN_RECORDS = 20_000
#: Batches the worker holds at once: enough that it never waits while the writer prepares one itself.
_AHEAD = 3
#: Batches the writer prepares itself while it waits for one worker answer, at most: their results wait behind that
#: answer, so a stalled worker (a busy machine) must not let them pile up to the whole load in memory.
_LOCAL_AHEAD = 2 * _AHEAD

EMPTY_LIST_JSON = to_json([])
EMPTY_OBJECT_JSON = to_json({})


def json_text(value: Any) -> str:
    """``to_json(value)``, with the empty list and object (most records' tags and metadata) as constants."""
    if not value:
        if value == []:
            return EMPTY_LIST_JSON
        if value == {}:
            return EMPTY_OBJECT_JSON
    return to_json(value)


class FtsText(NamedTuple):
    """What FTS5 indexes for one memory: ``ml_index_text`` of its title, content and tags (as the trigger computes it)."""

    title: str
    content: str
    tags: str


def indexed(text: str) -> str:
    """``index_text(text)``: an ASCII text is indexed as it is (no CJK run to split, no symbol to spell out, and NFC
    leaves it unchanged), and so is one that only ends in the ellipsis of a cut title (U+2026 is punctuation, not
    a symbol, and composes with nothing), so both skip the work."""
    if text.isascii() or (text[-1] == "\u2026" and text[:-1].isascii()):
        return text
    return index_text(text)


def fts_text(title: str, content: str, tags_json: str) -> FtsText:
    """The FTS row of a memory with this title, content and tags JSON, as ``memories_fts_insert`` would index it."""
    return FtsText(indexed(title), indexed(content), indexed(tags_json))


def insert_new(
    conn: db.Connection,
    insert_sql: str,
    rows: Sequence[tuple[Any, ...]],
    fts_rows: Sequence[tuple[Any, ...]],
    *,
    dates_given: bool = False,
    in_session: Sequence[int] | None = None,
) -> None:
    """Insert new memories (``insert_sql`` over ``rows``) and their full-text rows ``(id, title, content, tags)``
    as :func:`fts_text` gives them, inside the caller's write transaction, without the per-row FTS trigger.

    ``insert_sql`` stores each row's ``index_dates`` with ``ml_date_terms`` in its VALUES; or, with
    ``dates_given``, the rows carry it (as :func:`memlens.storage.index_context.dates_of` gives it) and each FTS row
    has a fifth item, those dates as FTS5 indexes them (:func:`indexed`). ``in_session``: the ids of the new
    memories that have a session, when the caller knows (only they can have a context).

    Each new memory gets the indexed context and dates the trigger path gives it (see
    :mod:`memlens.storage.index_context`), computed once all of them are in (a turn's previous turn may be in the
    same batch), and older memories that now follow one of them are refreshed. The triggers are dropped and
    created again from their stored SQL within the transaction (see the module docstring), so whatever happens the
    store never keeps a state without them."""
    from memlens.schema import context_sql
    from memlens.storage.index_context import refresh_after_insert

    if not conn.in_transaction:
        raise RuntimeError("insert_new must run inside a write transaction")
    if not rows:
        return
    dropped: list[str] = []
    for name in (FTS_INSERT_TRIGGER, FTS_UPDATE_TRIGGER):
        row = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = ?", (name,)).fetchone()
        if row is not None:
            conn.execute(f"DROP TRIGGER {name}")
            dropped.append(row[0])
    conn.executemany(insert_sql, rows)
    ids = [fts[0] for fts in fts_rows]
    if dates_given:
        # A memory without a session has no context (context_sql's CASE): only the others are read back.
        wanted = ids if in_session is None else list(in_session)
        sql = f"SELECT b.id, {context_sql('b')} FROM memories b WHERE b.id IN ({{marks}}) AND b.session_id IS NOT NULL"
        contexts: dict[int, str] = {memory_id: context for memory_id, context in db.select_in(conn, sql, wanted) if context}
        fts_values = [(*fts, indexed(contexts[fts[0]]) if fts[0] in contexts else "") for fts in fts_rows]
    else:
        # The dates were stored by the INSERT (ml_date_terms in its VALUES); the context needs every new row in place.
        derived: dict[int, tuple[str, str]] = {}
        sql = f"SELECT b.id, b.index_dates, {context_sql('b')} FROM memories b WHERE b.id IN ({{marks}})"
        for memory_id, dates, context in db.select_in(conn, sql, ids):
            derived[memory_id] = (context, dates)
        contexts = {memory_id: context for memory_id, (context, _dates) in derived.items() if context}
        fts_values = [(*fts, indexed(derived[fts[0]][1]), indexed(derived[fts[0]][0])) for fts in fts_rows]
    if contexts:
        conn.executemany("UPDATE memories SET index_context = ? WHERE id = ?", [(context, memory_id) for memory_id, context in contexts.items()])
    if not is_postgres(conn):  # a server indexes the new rows at commit (memlens.postgres.derived)
        conn.executemany(_FTS_INSERT, fts_values)
    for trigger_sql in dropped:
        conn.execute(trigger_sql)
    # Only a memory in a session can be another's previous turn, so the new ones in a session are all it needs.
    refresh_after_insert(conn, ids if in_session is None else in_session)


#: token -> token_key(token), for similarity_keys: a plain dict lookup is a third of an lru_cache hit's cost, and an
#: import looks up every token of every record. Emptied when it grows past a large vocabulary.
_TOKEN_KEYS: dict[str, str] = {}
_TOKEN_KEYS_MAX = 1 << 18


def similarity_keys(tokens: Iterable[str]) -> list[str]:
    """The distinct :func:`memlens.text.token_key` of ``tokens``, sorted: what :func:`memlens.supersede.keys_text`
    joins by spaces (tests/test_import_speed.py compares the two)."""
    try:
        keys = set(map(_TOKEN_KEYS.__getitem__, tokens))
    except KeyError:
        if len(_TOKEN_KEYS) > _TOKEN_KEYS_MAX:
            _TOKEN_KEYS.clear()
        keys = {_TOKEN_KEYS[t] if t in _TOKEN_KEYS else _TOKEN_KEYS.setdefault(t, token_key(t)) for t in tokens}
    return sorted(keys)


def chunks(items: Iterable[T], size: int) -> Iterator[tuple[int, list[T]]]:
    """``items`` in lists of ``size`` (the last may be shorter), each with the position of its first item."""
    batch: list[T] = []
    start = 0
    for position, item in enumerate(items):
        if not batch:
            start = position
        batch.append(item)
        if len(batch) >= size:
            yield start, batch
            batch = []
    if batch:
        yield start, batch


def worth_a_worker(items: Iterable[Any]) -> bool:
    """Whether preparing ``items`` in a worker process pays: a known, large count and a second core."""
    return isinstance(items, Sequence) and len(items) >= PARALLEL_MIN_RECORDS and (os.cpu_count() or 1) > 1


#: A slot of prepared_in_order whose item went to the worker; and what ``next`` gives when the items are all taken.
_SENT = None
_NO_ITEM: Any = object()


def prepared_in_order(work: Iterable[T], prepare: Callable[[T], R], *, parallel: bool) -> Iterator[R]:
    """``prepare(w)`` for each item of ``work``, in order.

    With ``parallel``, a worker process (``python -m memlens.storage.bulk``) computes them a few items ahead of the
    consumer (the first item is prepared here, while the worker starts), and whenever the consumer comes for the
    next result before the worker has it, the consumer prepares the next unsent item itself instead of waiting (so
    the two cores share the preparing however the costs of preparing and consuming compare; the worker keeps
    :data:`_AHEAD` items in hand). ``prepare`` must then be a module-level function or a ``functools.partial`` of
    one, and items and results picklable; it must give the same result wherever it runs (a pure function). An
    exception raised by ``prepare`` comes out where its item would have, after every earlier result; closing the
    iterator early stops the worker. The worker is a fresh interpreter rather than a fork (a process running Qt
    threads cannot fork safely) and is started directly rather than through multiprocessing, which would re-run the
    caller's main script in it."""
    if not parallel:
        for item in work:
            yield prepare(item)
        return
    # Imported here: every agent hook writes through this module's neighbours and must stay light to start.
    import queue
    import subprocess
    import threading

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    proc = subprocess.Popen([sys.executable, "-m", "memlens.storage.bulk"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    assert proc.stdin is not None and proc.stdout is not None
    to_send: queue.SimpleQueue[tuple[Callable[[T], R], T] | None] = queue.SimpleQueue()
    answers: queue.SimpleQueue[tuple[bool, Any] | None] = queue.SimpleQueue()
    feeder = threading.Thread(target=_feed, args=(to_send, proc.stdin), name="memlens-bulk-feeder", daemon=True)
    reader = threading.Thread(target=_read, args=(proc.stdout, answers), name="memlens-bulk-reader", daemon=True)
    feeder.start()
    reader.start()
    # One entry an item taken from ``work``, in its order: _SENT (the worker's answers come in the order sent) or the
    # (ok, result) of an item prepared here.
    slots: collections.deque[tuple[bool, Any] | None] = collections.deque()
    items = iter(work)

    def send_one() -> None:
        for item in items:
            to_send.put((prepare, item))
            slots.append(_SENT)
            return

    try:
        # The first item is prepared here while the worker starts (a fresh interpreter: a tenth of a second) and
        # prepares the next ones: the writer can begin at once instead of waiting for the worker's first answer.
        first = next(items, _NO_ITEM)
        for _ in range(_AHEAD):
            send_one()
        if first is not _NO_ITEM:
            try:
                slots.appendleft((True, prepare(first)))
            except Exception as exc:  # raised in its turn: the first
                slots.appendleft((False, exc))
        while slots:
            answer = slots.popleft()
            if answer is _SENT:
                answer = _answer_or_work_here(answers, items, prepare, slots)
                if answer is None:
                    raise RuntimeError(f"the bulk-import worker process stopped (exit code {proc.wait()})")
                send_one()  # the worker's hand back to _AHEAD items
            ok, result = answer
            if not ok:
                raise result
            yield result
    finally:
        to_send.put(None)
        feeder.join()
        if proc.poll() is None:
            proc.kill()  # our own child, told to stop by its closed input; killed only if still busy
        proc.wait()
        reader.join()
        proc.stdout.close()


def _answer_or_work_here(
    answers: queue.SimpleQueue[tuple[bool, Any] | None], items: Iterator[T], prepare: Callable[[T], R], slots: collections.deque[Any]
) -> tuple[bool, Any] | None:
    """The worker's next answer (None: the worker is gone); until it is there, the next items of ``items`` prepared
    here (their answers put at the end of ``slots``, where their turn comes), up to :data:`_LOCAL_AHEAD` of them."""
    import queue

    while True:
        try:
            answer = answers.get_nowait()
            break
        except queue.Empty:
            pass
        item = next(items, _NO_ITEM) if len(slots) < _AHEAD + _LOCAL_AHEAD else _NO_ITEM
        if item is _NO_ITEM:
            answer = answers.get()
            break
        try:
            slots.append((True, prepare(item)))
        except Exception as exc:  # raised in its turn, after the earlier items' results
            slots.append((False, exc))
            answer = answers.get()
            break
    return answer


def _read(pipe: IO[bytes], answers: queue.SimpleQueue[tuple[bool, Any] | None]) -> None:
    """Read the worker's answers as they come (a thread, so the consumer can see whether one is there), then None."""
    import pickle

    try:
        while True:
            answers.put(pickle.load(pipe))
    except Exception:  # the end of the pipe, or an answer cut off by the worker's end: either way no more answers
        pass
    finally:
        answers.put(None)


def _feed(to_send: queue.SimpleQueue[Any], pipe: IO[bytes]) -> None:
    """Write the queued work to the worker until told to stop (a thread, so a full pipe never stalls the reader)."""
    import pickle

    try:
        while (message := to_send.get()) is not None:
            pickle.dump(message, pipe, protocol=pickle.HIGHEST_PROTOCOL)
            pipe.flush()
    except (BrokenPipeError, OSError):
        pass  # the worker is gone; the reader reports it
    finally:
        try:
            pipe.close()
        except OSError:
            pass


def _serve(source: IO[bytes], sink: IO[bytes]) -> None:
    """The worker's loop: each ``(prepare, item)`` read answered by ``(True, result)`` or ``(False, exception)``."""
    import pickle

    while True:
        try:
            prepare, item = pickle.load(source)
        except EOFError:
            return
        try:
            answer: tuple[bool, Any] = (True, prepare(item))
        except Exception as exc:  # sent back to be raised in the importing process
            answer = (False, exc)
        try:
            data = pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # an exception that does not pickle still says what went wrong
            data = pickle.dumps((False, RuntimeError(f"{type(answer[1]).__name__}: {answer[1]} ({exc})")))
        sink.write(data)
        sink.flush()


if __name__ == "__main__":
    _serve(sys.stdin.buffer, sys.stdout.buffer)
