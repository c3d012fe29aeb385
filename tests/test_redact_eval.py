"""Redaction measured on the labelled set, by key name in JSON, and never twice."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from memlens.cli import main
from memlens.redact import is_secret_name, redact, redact_value
from memlens.redact_eval import evaluate, load_labelled

ROOT = Path(__file__).resolve().parent.parent


def test_the_shipped_set_is_what_the_script_writes():
    spec = importlib.util.spec_from_file_location("make_redaction_eval", ROOT / "tests" / "data" / "make_redaction_eval.py")
    assert spec and spec.loader
    maker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(maker)
    assert (ROOT / "core" / "data" / "redaction_eval.jsonl").read_text(encoding="utf-8") == maker.render(maker.build())


def test_recall_is_whole_and_no_look_alike_is_touched():
    records = load_labelled()
    assert sum(r["label"] == "secret" for r in records) >= 150 and sum(r["label"] == "lookalike" for r in records) >= 150
    result = evaluate(records)
    assert [r["kind"] for r in result.leaked] == []
    assert result.recall == 1.0 and result.precision >= 0.97, [r["redacted"] for r in result.flagged]


def test_redact_check_eval_prints_the_figures(capsys, tmp_path: Path):
    assert main(["redact-check", "--eval"]) == 0
    out = capsys.readouterr().out
    assert "recall     1.000" in out and "precision" in out
    mine = tmp_path / "mine.jsonl"
    mine.write_text(json.dumps({"label": "secret", "kind": "pet", "text": "the dog is called Rex", "secret": "Rex"}) + "\n", encoding="utf-8")
    assert main(["redact-check", "--eval", str(mine), "--json"]) == 1  # a leak fails the command
    assert json.loads(capsys.readouterr().out)["leaked"] == [{"kind": "pet", "text": "the dog is called Rex"}]


@pytest.mark.parametrize(
    "text",
    [
        "DB_PASSWORD=hunter2xx",
        "POSTGRES_PASSWORD=pg-s3cret",
        "client_secret=abcDEF123456",
        "GITHUB_TOKEN=v1.0123456789abcdef0123",
        '{"SecretAccessKey": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}',
        "redis://:pw1234@cache:6379/0",
        "postgres://app:p@ss@w0rd@db:5432/app",
        "-----BEGIN PGP PRIVATE KEY BLOCK-----\nlQOYBF0\n-----END PGP PRIVATE KEY BLOCK-----",
        '"private_key_id": "1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b"',
        "password is S3cr3t!",
        "my token: tok_ab12cd34ef",
        "密码是Hunter22",
    ],
)
def test_the_shapes_the_attack_found(text):
    redacted, found = redact(text)
    assert found and "[REDACTED:" in redacted
    for secret in ("hunter2xx", "pg-s3cret", "abcDEF123456", "v1.0123", "wJalrXUtn", "pw1234", "p@ss@w0rd", "lQOYBF0", "1a2b3c4d", "S3cr3t!", "tok_ab12", "Hunter22"):
        assert secret not in redacted


def test_redaction_never_runs_twice():
    for record in load_labelled():
        once, _ = redact(record["text"])
        assert redact(once) == (once, []), record["kind"]


def test_json_is_redacted_by_key_name():
    value = {
        "user": "me",
        "password": "correcthorse",
        "nested": {"clientSecret": "plainwords", "max_tokens": 4096, "token_uri": "https://oauth2.example.com/token", "pin": 1234},
        "env": [{"name": "DB_PASSWORD", "value": "opensesame"}, {"name": "HOME", "value": "/home/me"}],
        "TOKEN": "xoxb-1234567890-abcdefghijklmn",
        "auth": "dXNlcjpwYXNz",
        "author": "Ada",
    }
    out, rules = redact_value(value)
    assert out["password"] == out["nested"]["clientSecret"] == out["env"][0]["value"] == out["auth"] == "[REDACTED:secret-field]"
    assert out["nested"]["pin"] == "[REDACTED:secret-field]"
    assert out["nested"]["max_tokens"] == 4096 and out["nested"]["token_uri"].startswith("https://") and out["env"][1]["value"] == "/home/me"
    assert out["TOKEN"] == "[REDACTED:slack-token]" and out["author"] == "Ada"
    assert rules == {"secret-field", "slack-token"}
    assert redact_value(out) == (out, set())  # nothing left to find the second time


@pytest.mark.parametrize("name", ["password", "DB_PASSWORD", "SecretAccessKey", "private_key_id", "apiKey", "access_token", "auth", "credentials"])
def test_secret_names(name):
    assert is_secret_name(name)


@pytest.mark.parametrize("name", ["max_tokens", "input_tokens", "token_uri", "password_min_length", "secretName", "tokenizer", "author", "key", "token_type"])
def test_names_that_only_sound_secret(name):
    assert not is_secret_name(name)


def test_a_prompt_cut_through_a_secret_leaves_nothing_of_it(store, t0):
    from memlens.hooks import MAX_PROMPT_CHARS, handle_event

    key = "ghp_" + "a1B2c3D4e5" * 4
    prompt = "x" * (MAX_PROMPT_CHARS - 20) + " " + key + " and more"
    handle_event(store, {"hook_event_name": "UserPromptSubmit", "session_id": "s1", "prompt": prompt}, now=t0)
    (m,) = store.session_memories("s1")
    assert key[:12] not in m.content and m.metadata["redactions"] == ["github-token"]


def test_an_edit_summary_cut_through_a_secret_leaves_nothing_of_it(store, t0):
    key = "sk-ant-api03-" + "Zq9" * 60
    line = "y" * 144 + " " + key  # each changed line is shown cut to 160 characters
    m = store.observe("s1", "Edit", {"file_path": ".env", "old_string": "a", "new_string": line}, {"ok": True}, now=t0)
    assert key[:12] not in m.content and key[:12] not in json.dumps(m.metadata)
