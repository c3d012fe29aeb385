"""Supersede: the seed example, project isolation, most-similar choice, advisory matches, and exactness
against a brute-force scan on random data."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memlens import MemoryStore
from memlens.supersede import brute_force_best, find_best
from memlens.text import jaccard, similarity_tokens

YARN = "Use yarn to install dependencies in this project"
PNPM = "Use pnpm to install dependencies in this project"


def test_seed_example_pnpm_supersedes_yarn(store: MemoryStore, t0):
    yarn = store.remember(YARN, project="web", now=t0)
    pnpm = store.remember(PNPM, project="web", now=t0 + timedelta(minutes=5))
    assert jaccard(similarity_tokens(YARN), similarity_tokens(PNPM)) > 0.7
    assert pnpm.version == 2
    assert pnpm.parent_id == yarn.id
    assert pnpm.supersedes == (yarn.id,)
    assert pnpm.chain_id == yarn.chain_id == yarn.id
    assert pnpm.supersede_similarity == pytest.approx(5 / 7)
    old = store.get(yarn.id)
    assert old.is_latest is False and old.content == YARN  # kept, not deleted
    assert [h.memory.id for h in store.search("install dependencies", now=t0)] == [pnpm.id]
    assert [h.memory.id for h in store.search("yarn", now=t0)] == []
    assert [h.memory.id for h in store.search("yarn", include_superseded=True, now=t0)] == [yarn.id]
    assert [m.id for m in store.history(pnpm.id)] == [yarn.id, pnpm.id]
    assert [m.id for m in store.history(yarn.id)] == [yarn.id, pnpm.id]
    ops = [e.operation for e in store.audit()]
    assert ops[0] == "supersede"


def test_third_version_continues_the_chain(store: MemoryStore, t0):
    a = store.remember(YARN, now=t0)
    b = store.remember(PNPM, now=t0)
    c = store.remember("Use bun to install dependencies in this project", now=t0)
    assert (c.version, c.parent_id, c.chain_id) == (3, b.id, a.id)
    assert [m.is_latest for m in store.history(a.id)] == [False, False, True]


def test_projects_are_isolated_but_projectless_matches_any(store: MemoryStore, t0):
    web = store.remember(YARN, project="web", now=t0)
    api = store.remember(PNPM, project="api", now=t0)
    assert api.version == 1 and store.get(web.id).is_latest
    # No project on the new memory: it may supersede a project's memory (the most similar, then the newest).
    glob = store.remember("Use npm to install dependencies in this project", now=t0)
    assert glob.parent_id == api.id
    # And a project memory may supersede a project-less one.
    g2 = store.remember("Deploys go through the staging cluster first then production", now=t0)
    p2 = store.remember("Deploys go through the staging cluster first then to production", project="web", now=t0)
    assert p2.parent_id == g2.id


def test_most_similar_is_chosen(store: MemoryStore, t0):
    shared = "the build uses esbuild with the react preset for production bundles"
    # Different projects, so neither supersedes the other; a project-less memory may match both.
    far = store.remember(shared + " webpack", project="a", now=t0)
    near = store.remember(shared + " vite", project="b", now=t0)
    new = store.remember(shared + " vite today", now=t0)
    tokens = similarity_tokens(new.content)
    sim_near = jaccard(tokens, similarity_tokens(near.content))
    sim_far = jaccard(tokens, similarity_tokens(far.content))
    assert sim_near > sim_far > 0.7
    assert new.parent_id == near.id
    assert store.get(far.id).is_latest


def test_advisory_similar_to_is_linked_not_superseded(store: MemoryStore, t0):
    a = store.remember("Tests run with pytest and coverage on every push to main", now=t0)
    text = "Tests run with pytest on every push to the release branch"
    sim = jaccard(similarity_tokens(a.content), similarity_tokens(text))
    assert 0.4 < sim <= 0.7
    preview = store.preview_supersede(text, now=t0)
    assert preview.action == "similar" and preview.target is not None and preview.target.id == a.id
    b = store.remember(text, now=t0)
    assert b.version == 1 and store.get(a.id).is_latest
    related = [r for r in store.relations(b.id) if r.kind == "related"]
    assert [(r.src_id, r.dst_id) for r in related] == [(b.id, a.id)]
    assert related[0].score == pytest.approx(sim)


def test_preview_writes_nothing_and_matches_remember(store: MemoryStore, t0):
    a = store.remember(YARN, project="web", now=t0)
    before = store.stats(now=t0)
    audit_before = len(store.audit(limit=1000))
    preview = store.preview_supersede(PNPM, project="web", now=t0)
    assert preview.action == "supersede"
    assert preview.target is not None and preview.target.id == a.id
    assert preview.similarity == pytest.approx(5 / 7)
    assert "pnpm" in preview.only_new and "yarn" in preview.only_old and "dependencies" in preview.shared
    assert store.stats(now=t0)["memories"] == before["memories"]
    assert len(store.audit(limit=1000)) == audit_before
    assert store.preview_supersede(PNPM, project="other", now=t0).action == "new"
    b = store.remember(PNPM, project="web", now=t0)
    assert b.parent_id == preview.target.id


def test_working_and_episodic_layers_are_never_superseded(store: MemoryStore, t0):
    o1 = store.observe("s1", "Bash", {"command": "npm install"}, "added 3 packages", now=t0)
    o2 = store.observe("s1", "Bash", {"command": "npm install"}, "added 3 packages", now=t0)
    assert o2.version == 1 and store.get(o1.id).is_latest
    e1 = store.remember(YARN, type="summary", now=t0)
    e2 = store.remember(YARN, type="summary", now=t0)
    assert e1.layer == e2.layer == "episodic" and e2.version == 1


def test_cjk_bigrams_compare_sensibly():
    a = similarity_tokens("使用 pnpm 安装依赖")
    b = similarity_tokens("使用 yarn 安装依赖")
    assert a == {"使用", "pnpm", "安装", "装依", "依赖"}
    assert jaccard(a, b) == pytest.approx(4 / 6)
    assert similarity_tokens("Ab is an ok Word") == {"word"}


def test_expired_memories_are_not_superseded(store: MemoryStore, t0):
    a = store.remember(YARN, ttl_days=1, now=t0)
    b = store.remember(PNPM, now=t0 + timedelta(days=2))
    assert b.version == 1 and store.get(a.id).is_latest


def test_forgetting_the_latest_brings_the_previous_back(store: MemoryStore, t0):
    a = store.remember(YARN, now=t0)
    b = store.remember(PNPM, now=t0)
    result = store.forget(b.id, reason="wrong", now=t0)
    assert result.restored_latest == (a.id,)
    assert store.get(a.id).is_latest
    assert [h.memory.id for h in store.search("yarn", now=t0)] == [a.id]
    # And it is a supersede candidate again.
    c = store.remember(PNPM, now=t0)
    assert c.parent_id == a.id


# --- exactness against a brute-force scan ---------------------------------------------------------------------

VOCAB = [f"w{i:03d}" for i in range(60)]


def _random_text(rng: random.Random, base: list[str] | None = None) -> str:
    if base and rng.random() < 0.7:
        words = list(base)
        for _ in range(rng.randint(0, 3)):
            if words and rng.random() < 0.5:
                words.pop(rng.randrange(len(words)))
            else:
                words.append(rng.choice(VOCAB))
        return " ".join(words) or rng.choice(VOCAB)
    return " ".join(rng.choice(VOCAB) for _ in range(rng.randint(1, 12)))


@pytest.mark.parametrize("seed", range(6))
def test_find_best_equals_brute_force_on_random_data(db_path, t0, seed):
    rng = random.Random(seed)
    projects = [None, "a", "b"]
    texts: list[list[str]] = []
    matches = 0
    with MemoryStore.open(db_path) as store:
        for i in range(220):
            base = rng.choice(texts) if texts else None
            text = _random_text(rng, base)
            texts.append(text.split())
            tokens = similarity_tokens(text)
            project = rng.choice(projects)
            now_ts = (t0 + timedelta(minutes=i)).timestamp()
            for probe in (0.4, 0.7, 0.55):
                fast = find_best(store.conn, tokens, layer="semantic", project=project, probe_threshold=probe, now=now_ts)
                slow = brute_force_best(store.conn, tokens, layer="semantic", project=project, probe_threshold=probe, now=now_ts)
                assert fast == slow, (i, probe)
                matches += fast is not None
            store.remember(text, project=project, ttl_days=rng.choice([None, None, 0.02]), now=t0 + timedelta(minutes=i))
            if rng.random() < 0.05:
                latest = store.list_memories(limit=5, now=t0 + timedelta(minutes=i))
                if latest:
                    store.forget(rng.choice(latest).id, now=t0 + timedelta(minutes=i))
        assert matches > 50  # the data really exercises matching, not only misses
        # Invariant: exactly one latest version per chain.
        rows = store.conn.execute("SELECT chain_id, SUM(is_latest) FROM memories GROUP BY chain_id").fetchall()
        assert all(n == 1 for _, n in rows)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.sampled_from(VOCAB[:15]), min_size=1, max_size=8), min_size=1, max_size=25), st.lists(st.sampled_from(VOCAB[:15]), min_size=1, max_size=8))
def test_find_best_equals_brute_force_hypothesis(tmp_path_factory, existing, probe_words):
    path = tmp_path_factory.mktemp("hyp") / "m.db"
    from datetime import datetime, timezone

    now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    with MemoryStore.open(path) as store:
        store.remember_many({"content": " ".join(words), "created_at": now} for words in existing)
        tokens = similarity_tokens(" ".join(probe_words))
        for probe in (0.4, 0.7):
            fast = find_best(store.conn, tokens, layer="semantic", project=None, probe_threshold=probe, now=now.timestamp())
            slow = brute_force_best(store.conn, tokens, layer="semantic", project=None, probe_threshold=probe, now=now.timestamp())
            assert fast == slow
