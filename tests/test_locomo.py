"""The LoCoMo evaluation runs on any LoCoMo-shaped file: a tiny synthetic one written here (the real data set stays
outside the repository)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memlens.errors import InvalidInput
from memlens.eval import locomo

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
        ours = search(question, 3)
        assert ours[0] == "D1:1" and "D1:2" in ours  # the answer shares no word with the question but follows it
        assert "D1:2" not in baseline(question, 3)
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
    assert set(result["memlens"]["recall@10_by_category"]) == {"single-hop", "multi-hop", "temporal"}


def test_command_prints_a_table(data_file, capsys):
    assert locomo.main(["--data", str(data_file)]) == 0
    out = capsys.readouterr().out
    assert "recall@10" in out and "memlens search" in out and "plain FTS5 bm25 (OR)" in out and "single-hop" in out


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
