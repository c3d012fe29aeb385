"""CLI commands over the store itself: init, remember, observe, search, show, history, forget, update, audit, stats."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from memlens.cli.common import TIME_FORMAT, add_command, add_yes_flag, confirm_time, emit, format_when, now_from, open_store, parse_when, store_path
from memlens.decay import strength as strength_of
from memlens.errors import InvalidInput
from memlens.models import KNOWN_TYPES, Memory
from memlens.storage import validation
from memlens.storage.context import AUDIT_OPERATIONS
from memlens.storage.validation import LAYERS

#: The ``audit --operation`` value for every entry that erased memories (forget, forget_session, sweep erasures).
ERASURES = "erasures"


def register(sub: Any) -> None:
    """Add this module's subcommands."""
    p = add_command(sub, "init", cmd_init, help="create the store (if missing) and print where it is", clock=False)

    p = add_command(sub, "remember", cmd_remember, help="store a memory (supersedes a near-identical one)", now_help="remember as of this time")
    p.add_argument("content", nargs="?", help="the memory's text ('-' or nothing reads standard input)")
    p.add_argument("--type", default="fact", help=f"what kind of memory: {', '.join(KNOWN_TYPES)} or any short word (default: fact)")
    p.add_argument("--title", help="a short title (default: the start of the text)")
    p.add_argument("--layer", choices=LAYERS, help="working, episodic, semantic or procedural (default: the type's usual layer)")
    p.add_argument("--project", help="the project it belongs to (default: none)")
    p.add_argument("--tag", action="append", dest="tags", default=[], help="a tag; repeat the option for several (default: none)")
    p.add_argument("--importance", type=float, metavar="0..1", help="how much it matters, from 0 to 1 (default: estimated from the text)")
    p.add_argument("--ttl-days", type=float, metavar="DAYS", help="forget it after this many days (default: never by age alone)")
    p.add_argument("--session", help="the session id it came from (default: none)")
    p.add_argument("--source-ref", help="where it came from, e.g. a file or URL (default: none)")
    p.add_argument("--pin", action="store_true", help="pin it: the sweep never forgets it (default: not pinned)")
    p.add_argument("--no-supersede", action="store_true", help="store as a separate memory even if a near-identical one exists")
    add_yes_flag(p)

    p = add_command(sub, "observe", cmd_observe, help="store an agent's tool call as a working-layer observation", now_help="observe as of this time")
    p.add_argument("--session", required=True, help="the agent session's id (required)")
    p.add_argument("--tool", required=True, help="the tool's name, e.g. Bash (required)")
    p.add_argument("--input", dest="tool_input", default="", help="the tool's input, text or JSON (default: empty)")
    p.add_argument("--output", dest="tool_output", default="", help="the tool's output, text or JSON (default: empty)")
    p.add_argument("--project", help="the project it belongs to (default: none)")
    add_yes_flag(p)

    p = add_command(sub, "search", cmd_search, help="full-text search (latest, unexpired memories by default)", now_help="search as of this time (expiry, strength)")
    p.add_argument("query", help="words to find (quoted word by word unless --raw)")
    p.add_argument("--limit", type=int, default=10, help="at most this many results (default: 10)")
    p.add_argument("--layer", action="append", dest="layers", choices=LAYERS, help="only this layer; repeat the option for several (default: all)")
    p.add_argument("--type", action="append", dest="types", help="only this type; repeat the option for several (default: all)")
    p.add_argument("--project", help="only this project (default: all)")
    p.add_argument("--session", help="only this session id (default: all)")
    p.add_argument("--tag", action="append", dest="tags", help="only memories with this tag; repeat the option for several, all must match (default: any)")
    p.add_argument("--since", metavar="WHEN", help=f"only memories created at or after this time ({TIME_FORMAT})")
    p.add_argument("--until", metavar="WHEN", help=f"only memories created before this time ({TIME_FORMAT})")
    p.add_argument("--all-versions", action="store_true", help="include superseded versions (default: latest only)")
    p.add_argument("--include-expired", action="store_true", help="include memories whose TTL has passed (default: left out)")
    p.add_argument("--raw", action="store_true", help="the query is FTS5 syntax (default: plain words)")
    p.add_argument("--semantic", action="store_true", help="also rank by embeddings from MEMLENS_EMBED_* (filled by `memlens embed`)")
    p.add_argument("--recall", action="store_true", help="count the results as used, which reinforces them (writes; default: read only)")
    add_yes_flag(p, "with --recall, write with --now set to another time than the current one")

    p = add_command(sub, "show", cmd_show, help="one memory with its version history", now_help="show strength as of this time")
    p.add_argument("id", type=int, help="the memory's id")

    p = add_command(sub, "history", cmd_history, help="every version of a memory, oldest first", clock=False)
    p.add_argument("id", type=int, help="the id of any version of the memory")

    p = add_command(sub, "forget", cmd_forget, help="erase memories for good (audited)", now_help="forget as of this time")
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--id", type=int, action="append", dest="ids", help="a memory id; repeat the option for several")
    target.add_argument("--session", help="every memory of this session (lists them unless --yes)")
    target.add_argument("--query", help="every memory matching this search (lists them unless --yes)")
    p.add_argument("--whole-chain", action="store_true", help="with --id: erase every version (default: only that one)")
    p.add_argument("--project", help="with --query: only this project (default: all)")
    p.add_argument("--reason", help="why, kept in the audit log (default: none)")
    add_yes_flag(p, "with --session or --query, erase (otherwise only list what would go); with --now, act at another time")

    p = add_command(sub, "update", cmd_update, help="change importance, tags, pinning or TTL", now_help="update as of this time (the TTL counts from it)")
    p.add_argument("id", type=int, help="the memory's id")
    p.add_argument("--importance", type=float, metavar="0..1", help="the new importance, from 0 to 1")
    p.add_argument("--tags", help="the new tags, comma-separated; replaces the old ones ('' removes all)")
    pin = p.add_mutually_exclusive_group()
    pin.add_argument("--pin", action="store_true", help="pin it: the sweep never forgets it")
    pin.add_argument("--unpin", action="store_true", help="unpin it")
    ttl = p.add_mutually_exclusive_group()
    ttl.add_argument("--ttl-days", type=float, metavar="DAYS", help="forget it this many days from now")
    ttl.add_argument("--no-ttl", action="store_true", help="remove its TTL")
    add_yes_flag(p)

    p = add_command(sub, "audit", cmd_audit, help="the audit log, newest first", clock=False)
    p.add_argument(
        "action",
        nargs="?",
        choices=["list", "verify", "checkpoint"],
        default="list",
        help="list entries (default); verify the hash chain, its seals and checkpoints; or record a signed checkpoint of its head",
    )
    p.add_argument("--export", metavar="FILE", help="checkpoint: also write it to this new file, to keep or publish elsewhere")
    p.add_argument(
        "--checkpoint",
        metavar="FILE",
        action="append",
        default=[],
        help="verify: also check against this exported checkpoint (may be given more than once)",
    )
    p.add_argument("--limit", type=int, default=50, help="at most this many entries (default: 50)")
    p.add_argument(
        "--operation",
        metavar="OP",
        help=f"only this operation: {', '.join(AUDIT_OPERATIONS)}; or {ERASURES} for every entry that erased memories (default: all)",
    )
    p.add_argument("--target", type=int, metavar="ID", help="only entries about this memory id (default: all)")
    p.add_argument("--since", metavar="WHEN", help=f"only entries written at or after this time ({TIME_FORMAT})")
    p.add_argument("--until", metavar="WHEN", help=f"only entries written before this time ({TIME_FORMAT})")

    p = add_command(sub, "stats", cmd_stats, help="what the store holds", clock=False)


# --- formatting ------------------------------------------------------------------------------------------------


def memory_json(m: Memory, strength: float | None = None) -> dict[str, Any]:
    """The JSON shape of a memory on the command line."""
    data = m.to_dict()
    if strength is not None:
        data["strength"] = round(strength, 4)
    return data


def memory_line(m: Memory) -> str:
    """One line per memory for listings."""
    latest = "" if m.is_latest else " (superseded)"
    project = f" [{m.project}]" if m.project else ""
    return f"#{m.id} v{m.version} {m.layer}/{m.type}{project}{latest}: {m.title}"


def memory_block(m: Memory, strength: float | None = None) -> str:
    """A memory with its metadata, for `show`."""
    lines = [
        memory_line(m),
        "",
        m.content,
        "",
        f"  created      {format_when(m.created_at)}   last used {format_when(m.last_accessed_at)}   used {m.access_count}x",
        f"  importance   {m.importance:.2f}" + (f"   strength {strength:.2f}" if strength is not None else "") + ("   pinned" if m.pinned else ""),
        f"  origin       {m.origin}" + (f"   source {m.source_ref}" if m.source_ref else "") + (f"   session {m.session_id}" if m.session_id else ""),
    ]
    if m.tags:
        lines.append(f"  tags         {', '.join(m.tags)}")
    if m.forget_after:
        lines.append(f"  forget after {format_when(m.forget_after)}")
    if m.metadata.get("redactions"):
        lines.append(f"  redacted     {', '.join(m.metadata['redactions'])} (shown as [REDACTED:rule] in the text)")
    if isinstance(m.metadata.get("needs_review"), dict):
        sources = ", ".join(f"#{i}" for i in m.metadata["needs_review"].get("forgotten_sources", []))
        lines.append(f"  needs review derived from forgotten {sources} (memlens review --done {m.id} clears it)")
    if m.parent_id:
        sim = f" (similarity {m.supersede_similarity:.2f})" if m.supersede_similarity is not None else ""
        lines.append(f"  supersedes   #{m.parent_id}{sim}")
    return "\n".join(lines)


# --- handlers --------------------------------------------------------------------------------------------------


def cmd_init(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        stats = store.stats()
    emit(args, {"path": str(store_path(args)), "memories": stats["memories"]}, f"store ready at {store_path(args)} ({stats['memories']} memories)")
    return 0


def _read_content(value: str | None) -> str:
    if value is None or value == "-":
        if sys.stdin is None or sys.stdin.isatty():
            raise InvalidInput("give the memory's text as an argument or on standard input")
        return sys.stdin.read()
    return value


def _check_memory_args(args: argparse.Namespace, content: str) -> None:
    """Refuse bad values before the store is opened, so a refused `remember` never leaves a new, empty store behind
    (the store checks them again, with the same validators)."""
    type_ = validation.check_type(args.type)
    validation.check_text(content, "content")
    validation.check_layer(args.layer, type_)
    if args.title is not None:
        validation.check_text(args.title, "title")
    for name in ("project", "session", "source_ref"):
        validation.check_optional_name(getattr(args, name), name)
    validation.check_tags(args.tags)
    validation.check_importance(args.importance)
    validation.check_ttl(args.ttl_days)


def cmd_remember(args: argparse.Namespace) -> int:
    now = now_from(args)
    confirm_time(args, now)
    content = _read_content(args.content)
    _check_memory_args(args, content)
    with open_store(args) as store:
        m = store.remember(
            content,
            type=args.type,
            title=args.title,
            layer=args.layer,
            project=args.project,
            tags=args.tags,
            importance=args.importance,
            ttl_days=args.ttl_days,
            session_id=args.session,
            source_ref=args.source_ref,
            pinned=args.pin,
            supersede=not args.no_supersede,
            origin="user",
            now=now,
        )
        s = strength_of(m, now, store.settings.decay)
        related = [r for r in store.relations(m.id) if r.kind == "related" and r.src_id == m.id]
    data = memory_json(m, s)
    data["similar_to"] = [{"id": r.dst_id, "similarity": r.score} for r in related]

    def text() -> str:
        if m.parent_id:
            return f"remembered #{m.id} (version {m.version}, supersedes #{m.parent_id}, similarity {m.supersede_similarity:.2f})"
        extra = "".join(f"; similar to #{r.dst_id} ({r.score:.2f})" for r in related)
        return f"remembered #{m.id}{extra}"

    emit(args, data, text)
    return 0


def _maybe_json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def cmd_observe(args: argparse.Namespace) -> int:
    now = now_from(args)
    confirm_time(args, now)
    validation.check_optional_name(args.session, "session")
    validation.check_optional_name(args.project, "project")
    with open_store(args) as store:
        m = store.observe(args.session, args.tool, _maybe_json(args.tool_input), _maybe_json(args.tool_output), project=args.project, now=now)
    emit(args, memory_json(m), f"observed #{m.id}: {m.title}")
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    now = now_from(args)
    if args.recall:
        confirm_time(args, now)
    # Reading commands open with create=False: they never create a store, and name the missing one instead.
    with open_store(args, create=False) as store:
        hits = store.search(
            args.query,
            limit=args.limit,
            layers=args.layers,
            types=args.types,
            project=args.project,
            session_id=args.session,
            tags=args.tags,
            since=parse_when(args.since),
            until=parse_when(args.until),
            include_superseded=args.all_versions,
            include_expired=args.include_expired,
            raw=args.raw,
            semantic=True if args.semantic else None,
            now=now,
        )
        if args.recall and hits:
            store.recall([h.memory.id for h in hits], now=now)
        cfg = store.settings.decay
    data = [{**h.to_dict(), "memory": memory_json(h.memory, strength_of(h.memory, now, cfg))} for h in hits]

    def text() -> str:
        if not hits:
            return "no matches"
        return "\n".join(f"{memory_line(h.memory)}\n    {h.snippet}   (score {h.score:.3f})" for h in hits)

    emit(args, data, text)
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    now = now_from(args)
    with open_store(args, create=False) as store:
        m = store.get(args.id)
        versions = store.history(args.id)
        s = strength_of(m, now, store.settings.decay)
    data = {**memory_json(m, s), "history": [memory_json(v) for v in versions]}

    def text() -> str:
        out = memory_block(m, s)
        if len(versions) > 1:
            out += "\n\nversions:\n" + "\n".join("  " + memory_line(v) for v in versions)
        return out

    emit(args, data, text)
    return 0


def cmd_history(args: argparse.Namespace) -> int:
    with open_store(args, create=False) as store:
        versions = store.history(args.id)
    emit(args, [memory_json(v) for v in versions], lambda: "\n".join(memory_line(v) for v in versions))
    return 0


def cmd_forget(args: argparse.Namespace) -> int:
    now = now_from(args)
    confirm_time(args, now)
    with open_store(args, create=False) as store:
        if args.ids:
            if len(args.ids) == 1:
                result = store.forget(args.ids[0], reason=args.reason, whole_chain=args.whole_chain, now=now)
            else:
                for memory_id in args.ids:
                    store.get(memory_id)  # name the first unknown id before erasing anything
                result = store.forget_many(args.ids, reason=args.reason, whole_chain=args.whole_chain, now=now)
        elif not args.yes:
            # Erasing a whole session or every match is a big step: list what would go and ask for --yes.
            if args.session:
                doomed = store.session_memories(store.session(args.session).id)  # an unknown session is named
            else:
                doomed = [h.memory for h in store.search(args.query, limit=1000, project=args.project, include_superseded=True, include_expired=True, now=now)]
            emit(
                args,
                {"would_forget": [m.id for m in doomed], "dry_run": True},
                lambda: "\n".join(memory_line(m) for m in doomed) + f"\n{len(doomed)} memories would be erased; add --yes to erase them",
            )
            return 0
        elif args.session:
            result = store.forget_session(args.session, reason=args.reason, now=now)
        else:
            result = store.forget_matching(args.query, reason=args.reason, project=args.project, now=now)
    restored = f"; #{', #'.join(map(str, result.restored_latest))} is latest again" if result.restored_latest else ""
    # Said in words too: a reader holding old pages open can delay the last step of erasure (see forgetting.py).
    pending = f"\nnot yet gone from the file: {result.pending_erasure}" if result.pending_erasure else ""
    emit(args, result.to_dict(), f"erased {len(result.erased)} {'memory' if len(result.erased) == 1 else 'memories'}{restored}{pending}")
    return 0


_UPDATE_OPTIONS = "--importance, --tags, --pin, --unpin, --ttl-days or --no-ttl"


def cmd_update(args: argparse.Namespace) -> int:
    if args.importance is None and args.tags is None and not (args.pin or args.unpin or args.no_ttl) and args.ttl_days is None:
        raise InvalidInput(f"nothing to change: give at least one of {_UPDATE_OPTIONS}")
    now = now_from(args)
    confirm_time(args, now)
    pinned = True if args.pin else False if args.unpin else None
    tags = [t for t in args.tags.split(",")] if args.tags is not None else None
    with open_store(args, create=False) as store:
        m = store.update(args.id, importance=args.importance, tags=tags, pinned=pinned, ttl_days=args.ttl_days, clear_ttl=args.no_ttl, now=now)
    emit(args, memory_json(m), lambda: memory_block(m))
    return 0


def cmd_audit(args: argparse.Namespace) -> int:
    from memlens.storage.audit import read_published

    published = [read_published(path) for path in args.checkpoint]
    with open_store(args, create=False) as store:
        if args.action == "verify":
            check = store.audit_log.verify(published)
            data = {"ok": check.ok, "checked": check.checked, "first_bad_id": check.first_bad_id, "problem": check.problem}
            emit(args, data, f"audit log intact ({check.checked} entries)" if check.ok else f"audit log damaged: {check.problem}")
            return 0 if check.ok else 1
        if args.action == "checkpoint":
            checkpoint = store.audit_log.checkpoint(export=Path(args.export) if args.export else None)
            if checkpoint is None:
                raise InvalidInput("the audit log is empty: there is nothing to checkpoint yet")
            where = f"; written to {args.export}" if args.export else ""
            unsigned = "" if checkpoint.signature else " (unsigned: this store's audit key is missing)"
            emit(args, json.loads(checkpoint.to_json()), f"checkpoint: {checkpoint.entries} entries, head {checkpoint.head_hash}{unsigned}{where}")
            return 0
        known = sorted(set(AUDIT_OPERATIONS) | set(store.audit_operations()))
        if args.operation is not None and args.operation not in (*known, ERASURES):
            raise InvalidInput(f"no audit operation is called {args.operation!r}; use one of {', '.join(known)}, or {ERASURES} for every erasure")
        since, until = parse_when(args.since), parse_when(args.until)
        if args.operation == ERASURES:
            entries = _erasures(store, limit=args.limit, target_id=args.target, since=since, until=until)
        else:
            entries = store.audit(limit=args.limit, operation=args.operation, target_id=args.target, since=since, until=until)
        filtered = bool(args.operation or args.target is not None or since or until)

    def text() -> str:
        lines = []
        for e in entries:
            targets = " ".join(f"#{t}" for t in e.target_ids)
            details = ", ".join(f"{k}={v}" for k, v in e.details.items() if k not in ("content_sha256", "as_of"))
            as_of = f" (as of {format_when(e.as_of)})" if e.as_of != e.at else ""
            lines.append(f"{format_when(e.at, seconds=True)} {e.operation:<14} {e.actor:<8} {targets} {details}{as_of}".rstrip())
        if lines:
            return "\n".join(lines)
        return "no audit entries match" if filtered else "the audit log is empty"

    emit(args, [e.to_dict() for e in entries], text)
    return 0


#: The audit operations that erase memories; a sweep entry erases unless it only hid a duplicate or wrote an archive.
_ERASING_OPERATIONS = ("forget", "forget_session", "sweep")


def _erases(entry: Any) -> bool:
    return entry.operation != "sweep" or entry.details.get("action") in ("forget", "archive")


def _erasures(store: Any, *, limit: int, target_id: int | None, since: Any, until: Any) -> list[Any]:
    """The newest ``limit`` entries that erased memories: each erasing operation's newest, merged by id."""
    found: list[Any] = []
    for operation in _ERASING_OPERATIONS:
        offset = 0
        kept = 0
        while kept < limit:
            page = store.audit(limit=limit, offset=offset, operation=operation, target_id=target_id, since=since, until=until)
            matching = [e for e in page if _erases(e)]
            found += matching
            kept += len(matching)
            offset += len(page)
            if len(page) < limit:
                break
    return sorted(found, key=lambda e: e.id, reverse=True)[:limit]


def cmd_stats(args: argparse.Namespace) -> int:
    with open_store(args, create=False) as store:
        stats = store.stats()

    def text() -> str:
        lines = [f"store {stats['path']}  ({stats['file_bytes'] / 1e6:.1f} MB, schema {stats['schema_version']}, {stats['engine']})"]
        for layer, counts in stats["layers"].items():
            lines.append(f"  {layer:<11} {counts['latest']:>9,} latest  {counts['all']:>9,} all versions")
        lines.append(f"  sessions {stats['sessions']:,}   audit entries {stats['audit_entries']:,}   expired {stats['expired']:,}   pinned {stats['pinned']:,}")
        return "\n".join(lines)

    emit(args, stats, text)
    return 0
