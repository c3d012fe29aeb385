"""CLI commands over the store itself: init, remember, observe, search, show, history, forget, update, audit, stats."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from memlens.cli.common import add_command, emit, now_from, open_store, parse_when, store_path
from memlens.decay import strength as strength_of
from memlens.errors import InvalidInput
from memlens.models import Memory


def register(sub: Any) -> None:
    """Add this module's subcommands."""
    p = add_command(sub, "init", cmd_init, help="create the store (if missing) and print where it is", clock=False)

    p = add_command(sub, "remember", cmd_remember, help="store a memory (supersedes a near-identical one)")
    p.add_argument("content", nargs="?", help="the memory's text ('-' or nothing reads standard input)")
    p.add_argument("--type", default="fact", help="fact, preference, decision, pattern, workflow, bug, task, chitchat, ...")
    p.add_argument("--title")
    p.add_argument("--layer", choices=["working", "episodic", "semantic", "procedural"])
    p.add_argument("--project")
    p.add_argument("--tag", action="append", dest="tags", default=[], help="a tag (repeatable)")
    p.add_argument("--importance", type=float)
    p.add_argument("--ttl-days", type=float)
    p.add_argument("--session")
    p.add_argument("--source-ref")
    p.add_argument("--pin", action="store_true")
    p.add_argument("--no-supersede", action="store_true", help="store as a separate memory even if similar")

    p = add_command(sub, "observe", cmd_observe, help="store an agent's tool call as a working-layer observation")
    p.add_argument("--session", required=True)
    p.add_argument("--tool", required=True)
    p.add_argument("--input", dest="tool_input", default="", help="the tool's input (text or JSON)")
    p.add_argument("--output", dest="tool_output", default="", help="the tool's output")
    p.add_argument("--project")

    p = add_command(sub, "search", cmd_search, help="full-text search (latest, unexpired memories by default)")
    p.add_argument("query")
    p.add_argument("--limit", type=int, default=10)
    p.add_argument("--layer", action="append", dest="layers")
    p.add_argument("--type", action="append", dest="types")
    p.add_argument("--project")
    p.add_argument("--session")
    p.add_argument("--tag", action="append", dest="tags")
    p.add_argument("--since")
    p.add_argument("--until")
    p.add_argument("--all-versions", action="store_true", help="include superseded versions")
    p.add_argument("--include-expired", action="store_true")
    p.add_argument("--raw", action="store_true", help="the query is FTS5 syntax")
    p.add_argument("--semantic", action="store_true", help="also rank by embeddings from MEMLENS_EMBED_* (filled by `memlens embed`)")
    p.add_argument("--recall", action="store_true", help="count the results as used (reinforces them)")

    p = add_command(sub, "show", cmd_show, help="one memory with its version history")
    p.add_argument("id", type=int)

    p = add_command(sub, "history", cmd_history, help="every version of a memory, oldest first", clock=False)
    p.add_argument("id", type=int)

    p = add_command(sub, "forget", cmd_forget, help="erase memories for good (audited)")
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--id", type=int, action="append", dest="ids", help="a memory id (repeatable)")
    target.add_argument("--session", help="every memory of a session")
    target.add_argument("--query", help="every memory matching this search")
    p.add_argument("--whole-chain", action="store_true", help="with --id: erase every version")
    p.add_argument("--project", help="with --query: only this project")
    p.add_argument("--reason")
    p.add_argument("--yes", action="store_true", help="with --query: do it (otherwise only list what would go)")

    p = add_command(sub, "update", cmd_update, help="change importance, tags, pinning or TTL")
    p.add_argument("id", type=int)
    p.add_argument("--importance", type=float)
    p.add_argument("--tags", help="comma-separated; replaces the tags")
    pin = p.add_mutually_exclusive_group()
    pin.add_argument("--pin", action="store_true")
    pin.add_argument("--unpin", action="store_true")
    ttl = p.add_mutually_exclusive_group()
    ttl.add_argument("--ttl-days", type=float)
    ttl.add_argument("--no-ttl", action="store_true")

    p = add_command(sub, "audit", cmd_audit, help="the audit log, newest first", clock=False)
    p.add_argument("action", nargs="?", choices=["list", "verify"], default="list")
    p.add_argument("--limit", type=int, default=50)
    p.add_argument("--operation")
    p.add_argument("--target", type=int)
    p.add_argument("--since")
    p.add_argument("--until")

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
        f"  created      {m.created_at:%Y-%m-%d %H:%M} UTC   last used {m.last_accessed_at:%Y-%m-%d %H:%M} UTC   used {m.access_count}x",
        f"  importance   {m.importance:.2f}" + (f"   strength {strength:.2f}" if strength is not None else "") + ("   pinned" if m.pinned else ""),
        f"  origin       {m.origin}" + (f"   source {m.source_ref}" if m.source_ref else "") + (f"   session {m.session_id}" if m.session_id else ""),
    ]
    if m.tags:
        lines.append(f"  tags         {', '.join(m.tags)}")
    if m.forget_after:
        lines.append(f"  forget after {m.forget_after:%Y-%m-%d %H:%M} UTC")
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


def cmd_remember(args: argparse.Namespace) -> int:
    now = now_from(args)
    content = _read_content(args.content)
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
    with open_store(args) as store:
        m = store.observe(args.session, args.tool, _maybe_json(args.tool_input), _maybe_json(args.tool_output), project=args.project, now=now_from(args))
    emit(args, memory_json(m), f"observed #{m.id}: {m.title}")
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    now = now_from(args)
    with open_store(args) as store:
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
    with open_store(args, create=False) as store:
        if args.ids:
            if len(args.ids) == 1:
                result = store.forget(args.ids[0], reason=args.reason, whole_chain=args.whole_chain, now=now)
            else:
                for memory_id in args.ids:
                    store.get(memory_id)  # name the first unknown id before erasing anything
                result = store.forget_many(args.ids, reason=args.reason, whole_chain=args.whole_chain, now=now)
        elif args.session:
            result = store.forget_session(args.session, reason=args.reason, now=now)
        else:
            if not args.yes:
                hits = store.search(args.query, limit=1000, project=args.project, include_superseded=True, include_expired=True, now=now)
                emit(
                    args,
                    {"would_forget": [h.memory.id for h in hits], "dry_run": True},
                    lambda: "\n".join(memory_line(h.memory) for h in hits) + f"\n{len(hits)} memories would be erased; add --yes to erase them",
                )
                return 0
            result = store.forget_matching(args.query, reason=args.reason, project=args.project, now=now)
    restored = f"; #{', #'.join(map(str, result.restored_latest))} is latest again" if result.restored_latest else ""
    emit(args, result.to_dict(), f"erased {len(result.erased)} memories{restored}")
    return 0


def cmd_update(args: argparse.Namespace) -> int:
    pinned = True if args.pin else False if args.unpin else None
    tags = [t for t in args.tags.split(",")] if args.tags is not None else None
    with open_store(args, create=False) as store:
        m = store.update(args.id, importance=args.importance, tags=tags, pinned=pinned, ttl_days=args.ttl_days, clear_ttl=args.no_ttl, now=now_from(args))
    emit(args, memory_json(m), lambda: memory_block(m))
    return 0


def cmd_audit(args: argparse.Namespace) -> int:
    with open_store(args, create=False) as store:
        if args.action == "verify":
            check = store.verify_audit()
            data = {"ok": check.ok, "checked": check.checked, "first_bad_id": check.first_bad_id, "problem": check.problem}
            emit(args, data, f"audit log intact ({check.checked} entries)" if check.ok else f"audit log damaged: {check.problem}")
            return 0 if check.ok else 1
        entries = store.audit(limit=args.limit, operation=args.operation, target_id=args.target, since=parse_when(args.since), until=parse_when(args.until))

    def text() -> str:
        lines = []
        for e in entries:
            targets = " ".join(f"#{t}" for t in e.target_ids)
            details = ", ".join(f"{k}={v}" for k, v in e.details.items() if k != "content_sha256")
            lines.append(f"{e.at:%Y-%m-%d %H:%M:%S} {e.operation:<14} {e.actor:<8} {targets} {details}".rstrip())
        return "\n".join(lines) or "the audit log is empty"

    emit(args, [e.to_dict() for e in entries], text)
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        stats = store.stats()

    def text() -> str:
        lines = [f"store {stats['path']}  ({stats['file_bytes'] / 1e6:.1f} MB, schema {stats['schema_version']}, SQLite {stats['sqlite_version']})"]
        for layer, counts in stats["layers"].items():
            lines.append(f"  {layer:<11} {counts['latest']:>9,} latest  {counts['all']:>9,} all versions")
        lines.append(f"  sessions {stats['sessions']:,}   audit entries {stats['audit_entries']:,}   expired {stats['expired']:,}   pinned {stats['pinned']:,}")
        return "\n".join(lines)

    emit(args, stats, text)
    return 0
