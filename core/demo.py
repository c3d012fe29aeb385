"""A realistic demo store: a few weeks of an agent's work across all four layers, written through the public API.

:func:`generate` replays an agent working on two projects day by day, every write with an explicit ``now``, so what
the store shows is real engine behaviour rather than fabricated rows: tool-call observations per session, sessions
ended and consolidated into episodes (and, once enough episodes recur, into facts and workflows), facts remembered
and later superseded (version chains with their similarities), an advisory "similar to" pair, recalls that reinforce
memories, TTLs that have run out or are about to, a pinned rule, chitchat that fades, edits, deliberate forgets with
reasons, and weekly sweeps that forgot what had decayed. The same ``seed`` and ``now`` always give the same store.

The demo belongs in a store of its own (:func:`demo_path_beside` names one). Written into a store that already
holds memories, it never touches them: a weekly sweep runs only when its dry run shows it would act on the demo's
own memories alone, and consolidation (which reads every ended session) is left out.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from memlens.consolidate import run as run_consolidation
from memlens.errors import InvalidInput
from memlens.postgres import is_url
from memlens.store import MemoryStore

PROJECTS = ("shop-web", "etl-pipeline")

#: Scripted knowledge: (day, hour, project, type, text, extra keyword arguments for remember). Later entries that are
#: near-copies of earlier ones supersede them; the pair about linting only comes out "similar".
KNOWLEDGE: tuple[tuple[int, float, str | None, str, str, dict[str, object]], ...] = (
    (1, 10.2, "shop-web", "fact", "The shop-web project installs dependencies with yarn", {"tags": ["tooling"]}),
    (1, 11.0, "shop-web", "fact", "The shop-web API base URL is https://staging.shop.example.com/api", {"tags": ["config", "api"]}),
    (1, 15.5, None, "preference", "The user prefers small commits with conventional commit messages", {"tags": ["git"]}),
    (2, 9.7, "etl-pipeline", "fact", "The etl-pipeline loads data into Postgres on port 5432", {"tags": ["database"]}),
    (2, 14.1, "etl-pipeline", "decision", "Decided to store every timestamp in UTC in the warehouse tables", {"tags": ["database", "decision"], "importance": 0.8}),
    (3, 10.4, None, "fact", "Never run migrations against production without a fresh backup", {"tags": ["safety"], "importance": 0.95, "pinned": True}),
    (3, 16.0, "shop-web", "workflow", "Release shop-web: bump the version, run the build, tag the commit and push the tag; CI deploys", {"tags": ["release"]}),
    (4, 11.3, "shop-web", "bug", "Cart totals were off by one cent when a discount applied; fixed by rounding in integer cents", {"tags": ["cart"]}),
    (5, 9.2, "shop-web", "pattern", "Run the linter before pushing to main", {"tags": ["ci"]}),
    (6, 13.0, "shop-web", "pattern", "Run the type checker before pushing to main", {"tags": ["ci"]}),
    (7, 10.0, "etl-pipeline", "fact", "The nightly etl-pipeline job starts at 02:00 UTC and takes about forty minutes", {"tags": ["schedule"]}),
    (9, 9.5, "shop-web", "fact", "The shop-web project installs dependencies with pnpm", {"tags": ["tooling"]}),
    (10, 15.2, "etl-pipeline", "fact", "The etl-pipeline loads data into Postgres on port 5433", {"tags": ["database"]}),
    (11, 10.8, "shop-web", "fact", "The shop-web API base URL is https://api.shop.example.com/v2", {"tags": ["config", "api"]}),
    (12, 14.4, None, "preference", "The user prefers small commits with conventional commit messages and signed tags", {"tags": ["git"]}),
    (13, 11.1, "shop-web", "workflow", "Release shop-web: bump the version, run the tests and the build, tag the commit and push the tag; CI deploys", {"tags": ["release"]}),
    (15, 9.9, "shop-web", "fact", "The shop-web project installs dependencies with pnpm workspaces", {"tags": ["tooling"]}),
    (16, 10.6, "etl-pipeline", "lesson", "Backfills must run with the warehouse in maintenance mode or the dashboards show half-loaded days", {"tags": ["backfill"]}),
    (17, 16.3, "etl-pipeline", "fact", "The etl-pipeline reads raw events from the bucket s3://acme-raw-events/daily", {"tags": ["storage"]}),
)

_PROMPTS = {
    "shop-web": (
        "The cart shows the wrong total with a discount code, can you look? We decided to keep all prices in integer cents.",
        "Add a loading state to the checkout button",
        "Why does the product page fetch prices twice?",
        "Please bump the dependencies and make sure the tests still pass",
        "Write tests for the coupon validation. We decided to keep all prices in integer cents.",
        "The search results page is slow on mobile, profile it",
        "Show the delivery estimate under the basket",
        "Refund emails go out twice, find the duplicate send",
        "Translate the checkout error messages into German",
        "Add alt text to every product image",
        "The wishlist icon overlaps the price on small screens",
        "Log a warning when the payment provider answers slowly",
        "Remove the old newsletter popup",
        "Make the address form remember the last country",
    ),
    "etl-pipeline": (
        "Yesterday's load failed, find out why",
        "Add a column for the order channel to the fact table. We switched to loading partitions by event date.",
        "Backfill last week's events after the schema change",
        "Make the dedup step idempotent",
        "Why are timestamps shifted by an hour in the dashboard?",
        "Speed up the nightly job, it runs past 3am. We switched to loading partitions by event date.",
        "Alert on Slack when a load takes longer than an hour",
        "Drop the unused staging tables",
        "Compare row counts between raw events and the warehouse",
        "Add a data quality check for negative quantities",
        "Document how to rerun a single day's partition",
        "Store the pipeline version with every loaded batch",
        "Split the customer dimension into current and history tables",
        "Retry the S3 download when the connection resets",
    ),
}
_FAILURES = {
    "shop-web": (
        "FAILED tests/cart.test.ts > totals > applies percentage discounts: expected 1999, got 2000",
        "FAILED tests/checkout.test.ts > button > disables while paying: element still enabled",
        "FAILED tests/search.test.ts > results > paginates: timeout after 5000 ms",
        "FAILED tests/i18n.test.ts > de > translates the card declined message: missing key",
        "FAILED tests/address.test.ts > form > keeps country: expected DE, got US",
        "FAILED tests/images.test.ts > product > has alt text: 3 images without alt",
    ),
    "etl-pipeline": (
        "FAILED tests/test_load.py::test_partition_dates - AssertionError: 2026-01-31 != 2026-02-01",
        "FAILED tests/test_dedup.py::test_rerun_is_noop - assert 1204 == 1200",
        "FAILED tests/test_schema.py::test_channel_column - KeyError: 'order_channel'",
        "FAILED tests/test_quality.py::test_negative_quantity_rejected - ValueError not raised",
        "FAILED tests/test_download.py::test_retries_on_reset - ConnectionResetError",
        "FAILED tests/test_customers.py::test_history_split - 12 rows missing",
    ),
}
_FILES = {
    "shop-web": ("src/cart/totals.ts", "src/checkout/Button.tsx", "src/products/price.ts", "src/search/results.tsx", "tests/cart.test.ts"),
    "etl-pipeline": ("etl/load.py", "etl/dedup.py", "etl/schema.sql", "etl/backfill.py", "tests/test_load.py"),
}
_TEST = {"shop-web": "pnpm test", "etl-pipeline": "pytest -q"}
_INSTALL = {"shop-web": "pnpm install", "etl-pipeline": "pip install -e ."}


@dataclass
class DemoSummary:
    """What the demo wrote (counts are of calls made; sweeps may since have forgotten some observations)."""

    days: int
    sessions: int = 0
    observations: int = 0
    knowledge: int = 0
    recalls: int = 0
    forgotten: int = 0
    consolidations: int = 0
    sweeps: int = 0
    swept: int = 0
    notes: list[str] = field(default_factory=list)
    #: The store the demo was written to (a string, so the summary stays JSON-ready).
    path: str = ""

    def describe(self) -> str:
        """One line for people."""
        return (
            f"{self.days} days, {self.sessions} sessions, {self.observations} observations, {self.knowledge} facts and "
            f"workflows, {self.consolidations} consolidations, {self.sweeps} sweeps ({self.swept} memories swept), "
            f"{self.forgotten} forgotten by hand"
        )


def generate(
    store: MemoryStore,
    *,
    now: datetime,
    days: int = 21,
    seed: int = 7,
    progress: Callable[[int, int], None] | None = None,
) -> DemoSummary:
    """Write ``days`` days of demo activity ending at ``now`` into ``store``; deterministic in ``seed`` and ``now``.

    ``progress(done_days, days)`` is called after each simulated day. Consolidation always uses the deterministic
    method here (never an LLM), so the result does not depend on the environment.
    """
    if now.tzinfo is None:
        raise InvalidInput("now must be a timezone-aware datetime")
    if not isinstance(days, int) or isinstance(days, bool) or not 3 <= days <= 365:
        raise InvalidInput("days must be a whole number from 3 to 365")
    rng = random.Random(seed)
    summary = DemoSummary(days=days, path=str(store.path))
    # Ids are never reused, so every memory above this one is the demo's own.
    first_demo_id = store.id_sequence() + 1
    shared = first_demo_id > 1
    start = (now - timedelta(days=days)).replace(hour=0, minute=0, second=0, microsecond=0)
    # Scripted knowledge is spread over the run: a script day of 21 maps onto ``days`` days.
    scale = days / 21.0
    script = sorted(
        (min(days - 1, int(day * scale)), hour, project, type_, text, extra) for day, hour, project, type_, text, extra in KNOWLEDGE
    )
    remembered: list[int] = []
    deck: dict[str, list[str]] = {}
    for day in range(days):
        day_start = start + timedelta(days=day)
        weekend = day_start.weekday() >= 5
        sessions_today = 0 if weekend and rng.random() < 0.7 else (1 if weekend else rng.choice((1, 2, 2)))
        for n in range(sessions_today):
            work = PROJECTS[(day + n) % 2]
            hour = 9.0 + n * 4.5 + rng.random()
            when = day_start + timedelta(hours=hour)
            if when >= now - timedelta(minutes=5):
                continue
            last_day = day == days - 1 and n == sessions_today - 1
            _session(store, rng, work, f"{work}-{day_start:%m%d}-{n + 1}", when, now, summary, deck, leave_open=last_day)
        for s_day, s_hour, project, type_, text, extra in script:
            if s_day != day:
                continue
            when = day_start + timedelta(hours=s_hour)
            if when >= now:
                continue
            memory = store.remember(text, type=type_, project=project, origin="agent", now=when, **extra)  # type: ignore[arg-type]
            remembered.append(memory.id)
            summary.knowledge += 1
        _daily_use(store, rng, remembered, day_start, now, summary)
        _scripted_events(store, day, days, day_start, now, summary)
        # Weekly: consolidate, then sweep. The sessions since the last Sunday are left for the person to consolidate.
        if day_start.weekday() == 6 and day < days - 1:
            when = min(day_start + timedelta(hours=21), now - timedelta(minutes=1))
            if not shared:
                run_consolidation(store, now=when, llm=None, from_env=False)
                summary.consolidations += 1
            _sweep_own(store, when + timedelta(minutes=30), first_demo_id, summary)
        if progress is not None:
            progress(day + 1, days)
    _recent_touches(store, now, summary)
    return summary


def demo_path_beside(store_path: Path | str) -> Path:
    """A file for a demo store in the same folder as ``store_path`` that does not exist yet: demo.db, demo-2.db, ...
    (beside the default store for a store on a PostgreSQL server: a demo never goes into a team's database)."""
    if is_url(str(store_path)):
        from memlens.config import default_store_path

        store_path = default_store_path()
    folder = Path(store_path).parent
    candidate = folder / "demo.db"
    n = 2
    while candidate.exists():
        candidate = folder / f"demo-{n}.db"
        n += 1
    return candidate


def _sweep_own(store: MemoryStore, when: datetime, first_demo_id: int, summary: DemoSummary) -> None:
    """Sweep at ``when`` only if the sweep would act on the demo's own memories alone (its dry run is exact);
    otherwise skip it and say so: a back-dated sweep must never erase memories the demo did not write."""
    planned = store.sweep(now=when, dry_run=True)
    if any(d.memory_id < first_demo_id for d in planned.decisions):
        summary.notes.append(f"skipped the sweep of {when:%Y-%m-%d}: it would have touched memories the demo did not write")
        return
    report = store.sweep(now=when)
    summary.sweeps += 1
    summary.swept += len(report.decisions)


def _session(
    store: MemoryStore,
    rng: random.Random,
    project: str,
    session_id: str,
    when: datetime,
    now: datetime,
    summary: DemoSummary,
    deck: dict[str, list[str]],
    *,
    leave_open: bool,
) -> None:
    store.start_session(session_id, project=project, metadata={"agent": "demo-agent", "model": "demo"}, now=when)
    summary.sessions += 1
    files = _FILES[project]
    prompt = _next_prompt(rng, deck, project)
    steps: list[tuple[str, object, object]] = [
        ("prompt", prompt, None),
        ("Bash", {"command": "git pull --rebase"}, "Already up to date."),
        ("Bash", {"command": _INSTALL[project]}, "Done in 4.1s"),
    ]
    for _ in range(rng.randint(3, 7)):
        path = rng.choice(files)
        kind = rng.random()
        if kind < 0.4:
            steps.append(("Read", {"file_path": path}, f"{rng.randint(40, 400)} lines"))
        elif kind < 0.75:
            steps.append(("Edit", {"file_path": path, "old_string": "…", "new_string": "…"}, "The file has been updated."))
        else:
            steps.append(("Grep", {"pattern": rng.choice(("total", "discount", "timezone", "dedup", "retry")), "path": "."}, f"{rng.randint(1, 9)} matches"))
    if rng.random() < 0.35:
        failure = _next_failure(rng, deck, project)
        steps.append(("Bash", {"command": _TEST[project]}, f"{failure}\n1 failed, {rng.randint(30, 60)} passed"))
        steps.append(("Edit", {"file_path": files[0], "old_string": "…", "new_string": "…"}, "The file has been updated."))
    steps.append(("Bash", {"command": _TEST[project]}, f"{rng.randint(30, 60)} passed in {rng.uniform(2, 9):.1f}s"))
    steps.append(("Bash", {"command": "git commit -am 'fix: " + prompt.split(",")[0].lower()[:40] + "'"}, "[main 3f2a1c9] 2 files changed"))
    t = when
    for tool, tool_input, output in steps:
        if t >= now:
            break
        if tool == "prompt":
            # As the agent hooks record a prompt (memlens.hooks): the text itself, marked as a prompt event.
            store.remember(
                str(tool_input), type="observation", layer="working", project=project, session_id=session_id,
                metadata={"event": "prompt", "tool_name": "prompt"}, origin="user", supersede=False, now=t,
            )
        else:
            store.observe(session_id, tool, tool_input, output, project=project, now=t)
        summary.observations += 1
        t += timedelta(minutes=rng.uniform(0.5, 6.0))
    if not leave_open and t < now:
        store.end_session(session_id, now=t)


def _next_prompt(rng: random.Random, deck: dict[str, list[str]], project: str) -> str:
    """The project's prompts in a shuffled cycle, so the same request does not come back every few days."""
    queue = deck.setdefault(project, [])
    if not queue:
        queue.extend(_PROMPTS[project])
        rng.shuffle(queue)
    return queue.pop()


def _next_failure(rng: random.Random, deck: dict[str, list[str]], project: str) -> str:
    """A failing test run's output; each is used once before any repeats (a recurring failure would read as a fact)."""
    queue = deck.setdefault("failures:" + project, [])
    if not queue:
        queue.extend(_FAILURES[project])
        rng.shuffle(queue)
    return queue.pop()


def _daily_use(store: MemoryStore, rng: random.Random, remembered: list[int], day_start: datetime, now: datetime, summary: DemoSummary) -> None:
    """The agent recalls a few of its memories each day (reinforcing them)."""
    alive = [i for i in remembered if store.exists(i)]
    if not alive:
        return
    when = day_start + timedelta(hours=12 + rng.random() * 4)
    if when >= now:
        return
    picks = sorted(set(rng.sample(alive, k=min(len(alive), rng.randint(1, 3)))))
    latest = [m.id for m in store.get_many(picks) if m.is_latest]
    if latest:
        store.recall(latest, now=when)
        summary.recalls += len(latest)


def _scripted_events(store: MemoryStore, day: int, days: int, day_start: datetime, now: datetime, summary: DemoSummary) -> None:
    """One-off events placed relative to the start or the end of the run."""
    at = day_start + timedelta(hours=17)
    if at >= now:
        return
    if day == 2:
        wrong = store.remember("The shop-web project bundles with Webpack", type="fact", project="shop-web", now=at)
        store.forget(wrong.id, reason="wrong: shop-web bundles with Vite", now=at + timedelta(minutes=20))
        store.remember("The shop-web project bundles with Vite", type="fact", project="shop-web", tags=["tooling"], now=at + timedelta(minutes=21))
        summary.forgotten += 1
        summary.knowledge += 1
    if day == days // 2:
        flag = store.remember(
            "Temporary: the new-checkout feature flag is enabled on staging for QA", type="fact", project="shop-web", tags=["flags"], ttl_days=2, now=at
        )
        summary.notes.append(f"#{flag.id} has a 2-day TTL that has run out")
        secret = store.remember("The user mentioned their cat is called Miso", type="chitchat", now=at + timedelta(minutes=5))
        store.forget(secret.id, reason="personal, not useful to the agent", now=at + timedelta(minutes=40))
        summary.forgotten += 1
    if day == days - 6:
        store.remember("The nightly ETL load starts at 02:00 UTC", type="fact", project="etl-pipeline", origin="agent", now=at)
        store.remember("The shop-web dev server listens on port 3000", type="fact", project="shop-web", origin="agent", now=at)
    if day == days - 2:
        # Two corrections that do not reword the old facts closely enough to supersede them: they become conflicts
        # for the person to settle in the Conflicts view (the user's word outranks the agent's inference).
        store.remember("Nightly load now starts at 04:00 UTC", type="fact", project="etl-pipeline", origin="user", now=at)
        store.remember("Run the shop-web dev server on port 5173 from now on", type="fact", project="shop-web", origin="user", now=at)
        summary.knowledge += 4
    if day == days - 3:
        for m in store.list_memories(types=["pattern"], project="shop-web", limit=5, now=at):
            store.update(m.id, importance=0.75, tags=[*m.tags, "must"], now=at)


def _recent_touches(store: MemoryStore, now: datetime, summary: DemoSummary) -> None:
    """Things that make the present interesting: expiring soon, fading, fresh."""
    store.remember(
        "Staging is frozen until Friday's release: no deploys without the release manager",
        type="fact", project="shop-web", tags=["release"], ttl_days=3, now=now - timedelta(days=1),
    )
    store.remember("The on-call rotation this week is Dana", type="fact", ttl_days=5, tags=["people"], now=now - timedelta(days=2))
    store.remember(
        "Temporary: the payments sandbox key is valid until tonight", type="fact", project="shop-web", tags=["payments"],
        ttl_days=1, now=now - timedelta(hours=30),
    )
    store.remember("The user said good morning and mentioned the coffee machine is broken", type="chitchat", now=now - timedelta(hours=30))
    store.remember("The user is happy with how the checkout refactor turned out", type="chitchat", now=now - timedelta(hours=9))
    reminder = store.remember(
        "The user asked to be reminded about the dentist appointment on Friday", type="chitchat", ttl_days=3, now=now - timedelta(hours=20)
    )
    store.recall([reminder.id], now=now - timedelta(hours=8))
    summary.recalls += 1
    summary.knowledge += 6
