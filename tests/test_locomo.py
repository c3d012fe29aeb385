"""The LoCoMo evaluation runs on any LoCoMo-shaped file: a tiny synthetic one written here (the real data set stays
outside the repository)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_embeddings import FakeEmbeddingServer
from test_fusion import FakeEmbedder

from memlens.errors import InvalidInput
from memlens.eval import locomo

EMBED_VARIABLES = ("BASE_URL", "MODEL", "API_KEY", "TIMEOUT", "QUERY_MODEL", "QUERY_PREFIX", "DOCUMENT_PREFIX")

FILLERS = ["Sure.", "Ha, yes.", "Okay then.", "Right.", "Of course.", "Nice one.", "Good point.", "Me too."]


def _sample(sample_id: str) -> dict:
    session_1 = [{"speaker": "Ana", "dia_id": "D1:1", "text": "Jon, which hiking trail is your favourite these days?"}]
    session_1.append({"speaker": "Jon", "dia_id": "D1:2",
                      "text": "Mount Tamalpais, every single Sunday morning before the crowds arrive at the parking lot near the old ranger station."})
    for i, text in enumerate(FILLERS, start=3):
        session_1.append({"speaker": "Jon" if i % 2 else "Ana", "dia_id": f"D1:{i}", "text": f"{'Jon' if i % 2 == 0 else 'Ana'}! {text}"})
    session_2 = [
        {"speaker": "Ana", "dia_id": "D2:1", "text": "I adopted a grey kitten named Pixel last week.",
         "img_url": ["x"], "blip_caption": "a photo of a small grey cat on a sofa", "query": "kitten"},
        {"speaker": "Jon", "dia_id": "D2:2", "text": "Congrats on the kitten! My sister keeps bees now."},
    ]
    return {
        "sample_id": sample_id,
        "conversation": {
            "speaker_a": "Ana",
            "speaker_b": "Jon",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": session_1,
            "session_2_date_time": "10:15 am on 2 June, 2023",
            "session_2": session_2,
            "session_3_date_time": "9:00 am on 3 June, 2023",  # a date without a session, as in LoCoMo
        },
        "qa": [
            {"question": "What is Jon's favourite hiking trail?", "answer": "Mount Tamalpais", "evidence": ["D1:2"], "category": 4},
            {"question": "What is the name of Ana's kitten?", "answer": "Pixel", "evidence": ["D:2:01"], "category": 1},
            {"question": "What does the cat look like?", "answer": "grey", "evidence": ["D2:1; D2:2"], "category": 2},
            {"question": "Does Jon like opera?", "adversarial_answer": "yes", "evidence": [], "category": 5},
            {"question": "Who keeps bees?", "answer": "Jon's sister", "evidence": ["D9:9"], "category": 3},
        ],
        "event_summary": {},
        "observation": {},
        "session_summary": {},
    }


@pytest.fixture(autouse=True)
def _no_embedding_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in EMBED_VARIABLES:
        monkeypatch.delenv(f"MEMLENS_EMBED_{name}", raising=False)


@pytest.fixture
def data_file(tmp_path: Path) -> Path:
    path = tmp_path / "tiny-locomo.json"
    path.write_text(json.dumps([_sample("tiny-1"), _sample("tiny-2")]))
    return path


def test_evidence_ids_are_normalised():
    known = {"D1:3", "D11:26", "D30:5", "D2:1"}
    assert locomo.normalise_evidence(["D1:3; D11:26", "D:11:26", "D30:05 D2:1", "D7:7", "junk"], known) == ("D1:3", "D11:26", "D30:5", "D2:1")


def test_load_keeps_questions_with_evidence(data_file):
    samples = locomo.load(data_file)
    assert [s.sample_id for s in samples] == ["tiny-1", "tiny-2"]
    sample = samples[0]
    assert len(sample.turns) == 12 and sample.skipped_questions == 2
    assert [q.evidence for q in sample.questions] == [("D1:2",), ("D2:1",), ("D2:1", "D2:2")]
    kitten = next(t for t in sample.turns if t.dia_id == "D2:1")
    assert kitten.content() == "Ana: I adopted a grey kitten named Pixel last week. [shares a photo of a small grey cat on a sofa]"
    assert kitten.when.isoformat() == "2023-06-02T10:15:00+00:00"


def test_the_reply_to_a_matching_turn_is_found_as_context(data_file, tmp_path):
    sample = locomo.load(data_file)[0]
    search, store = locomo.memlens_searcher(sample, tmp_path)
    baseline, conn = locomo.fts5_searcher(sample)
    try:
        question = "What is Jon's favourite hiking trail?"
        ours = [r.dia_id for r in search(question, 3)]
        assert ours[0] == "D1:1" and "D1:2" in ours  # the answer shares no word with the question but follows it
        assert "D1:2" not in [r.dia_id for r in baseline(question, 3)]
        hit = store.search(question, limit=3, now=sample.turns[-1].when)
        assert {h.memory.layer for h in hit} == {"working"} and hit[0].memory.session_id == "tiny-1/session_1"
    finally:
        store.close()
        conn.close()


def test_command_prints_json(data_file, capsys, tmp_path):
    out = tmp_path / "result.json"
    assert locomo.main(["--data", str(data_file), "--json", "--out", str(out)]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result == json.loads(out.read_text())
    assert result["questions"] == 6 and result["questions_skipped_without_evidence"] == 4
    for method in ("memlens", "fts5_bm25_or"):
        recall = result[method]["recall"]
        assert list(recall) == ["@1", "@5", "@10", "@20"]
        assert all(0.0 <= v <= 1.0 for v in recall.values())
        assert recall["@1"] <= recall["@5"] <= recall["@10"] <= recall["@20"]
    assert result["memlens"]["recall"]["@20"] == 1.0  # every gold turn of this tiny file is within reach
    assert result["mode"] == "bm25" and "misses" not in result
    by_category = result["memlens"]["recall_by_category"]
    assert set(by_category) == {"single-hop", "multi-hop", "temporal"}
    for value in by_category.values():
        assert list(value["recall"]) == ["@1", "@5", "@10", "@20"] and value["questions"] == 2
    # Each category's recall is its questions' average: the weighted mean over categories is the overall figure.
    for k in ("@1", "@5", "@10", "@20"):
        weighted = sum(v["recall"][k] * v["questions"] for v in by_category.values()) / result["questions"]
        assert weighted == pytest.approx(result["memlens"]["recall"][k], abs=0.002)


def test_command_prints_a_table(data_file, capsys):
    assert locomo.main(["--data", str(data_file)]) == 0
    out = capsys.readouterr().out
    assert "recall@10" in out and "memlens search" in out and "plain FTS5 bm25 (OR)" in out and "single-hop" in out
    assert "mode: bm25" in out and "by category" in out and "FTS5 @10" in out
    category_rows = [line.split() for line in out.splitlines() if line.strip().startswith(("single-hop", "multi-hop", "temporal"))]
    assert len(category_rows) == 3 and all(len(row) == 7 for row in category_rows)  # name, questions, 4 recalls, FTS5


def test_misses_lists_the_questions_without_evidence_in_the_top_k(data_file, tmp_path, capsys):
    misses = tmp_path / "misses.jsonl"
    assert locomo.main(["--data", str(data_file), "--json", "--misses", str(misses), "--misses-k", "1"]) == 0
    result = json.loads(capsys.readouterr().out)
    lines = [json.loads(line) for line in misses.read_text().splitlines()]
    assert result["misses"] == {"k": 1, "questions": len(lines)}
    assert len(lines) == _missed_at_1(data_file, tmp_path) > 0  # exactly the questions without a gold turn first
    for line in lines:
        assert set(line) == {"sample", "question", "category", "evidence", "ranked_above"}
        assert len(line["ranked_above"]) <= 1
        above = {r["dia_id"] for r in line["ranked_above"]}
        assert not above.intersection(e["dia_id"] for e in line["evidence"])
        for ranked in line["ranked_above"]:
            assert set(ranked) == {"dia_id", "memory_id", "snippet", "score"} and ranked["snippet"]
        for evidence in line["evidence"]:
            assert evidence["text"] and (evidence["rank"] is None or evidence["rank"] > 1)


def _missed_at_1(data_file: Path, tmp_path: Path) -> int:
    """How many questions of the tiny file have no gold turn first in memlens search."""
    missed = 0
    for sample in locomo.load(data_file):
        folder = tmp_path / sample.sample_id
        folder.mkdir()
        search, store = locomo.memlens_searcher(sample, folder)
        try:
            missed += sum(1 for q in sample.questions if not {r.dia_id for r in search(q.text, 1)}.intersection(q.evidence))
        finally:
            store.close()
    return missed


def test_semantic_search_through_an_embedder(data_file):
    """With an embedder every turn is embedded and questions are asked through fusion; recall is never below bm25's
    on this file."""
    samples = locomo.load(data_file)
    plain = locomo.evaluate(samples)
    embedder = FakeEmbedder(query_prefix="query: ", document_prefix="passage: ")
    fused = locomo.evaluate(samples, embedder=embedder)
    assert fused["mode"] == "semantic (fake-embed, fusion_alpha 0.7)"
    assert any(model == "fake-embed" and texts[0].startswith("passage: ") for model, texts in embedder.sent)
    assert any(texts == ["query: What is Jon's favourite hiking trail?"] for _model, texts in embedder.sent)
    for k in ("@1", "@5", "@10", "@20"):
        assert fused["memlens"]["recall"][k] >= plain["memlens"]["recall"][k]


def test_semantic_command_uses_the_endpoint_options(data_file, capsys):
    server = FakeEmbeddingServer()
    try:
        args = ["--data", str(data_file), "--json", "--semantic", "--embed-base-url", server.base_url, "--embed-model", "fake-embed",
                "--embed-document-prefix", "passage: ", "--embed-query-prefix", "query: "]  # fmt: skip
        assert locomo.main(args) == 0
    finally:
        server.close()
    result = json.loads(capsys.readouterr().out)
    assert result["mode"].startswith("semantic (fake-embed")
    inputs = [text for request in server.requests for text in request["body"]["input"]]
    assert any(text.startswith("passage: Jon: Mount Tamalpais") for text in inputs)
    assert "query: What is Jon's favourite hiking trail?" in inputs


def test_semantic_command_needs_an_endpoint(data_file, capsys):
    assert locomo.main(["--data", str(data_file), "--semantic"]) == 2
    assert "--semantic needs an embeddings endpoint" in capsys.readouterr().err
    assert locomo.main(["--data", str(data_file), "--semantic", "--embed-base-url", "http://127.0.0.1:9/v1"]) == 2
    assert "half configured" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{}", "expected a JSON list"),
        ("[1]", "expected an object"),
        ("not json", "is not JSON"),
        ('[{"conversation": {"session_1": [], "session_1_date_time": "yesterday"}, "qa": []}]', "is not like"),
    ],
)
def test_bad_files_are_refused_clearly(tmp_path, capsys, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(InvalidInput, match=message):
        locomo.load(path)
    assert locomo.main(["--data", str(path)]) == 2
    assert message in capsys.readouterr().err


def test_a_missing_file_is_refused(tmp_path, capsys):
    assert locomo.main(["--data", str(tmp_path / "nope.json")]) == 2
    assert "cannot read" in capsys.readouterr().err
