"""Secrets never reach the store: redaction on remember and observe."""

from __future__ import annotations

import pytest

from memlens import MemoryStore
from memlens.redact import redact

SECRETS = {
    "openai-key": "sk-proj-Abc123Def456Ghi789Jkl012Mno345Pqr678",
    "anthropic-key": "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789",
    "aws-access-key": "AKIAIOSFODNN7EXAMPLE",
    "github-token": "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    "slack-token": "xoxb-1234567890-abcdefghijklmn",
    "google-api-key": "AIzaSyA1234567890abcdefghijklmnopqrstuv",
    "stripe-key": "sk_live_abcdefghijklmnop1234",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
}


@pytest.mark.parametrize("rule,secret", SECRETS.items())
def test_provider_keys_are_redacted(rule, secret):
    text, found = redact(f"use {secret} for the call")
    assert secret not in text and f"[REDACTED:{rule}]" in text
    assert [f.rule for f in found] == [rule]


def test_bearer_private_key_and_private_tags():
    pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\nabc\n-----END RSA PRIVATE KEY-----"
    text, _ = redact(f"Authorization: Bearer abcdefghijklmnopqrstuvwxyz123\n{pem}\nmy <private>home address</private> ok password=hunter2hunter")
    assert "abcdefghijklmnopqrstuvwxyz123" not in text
    assert "MIIEowIBAAKCAQEA" not in text
    assert "home address" not in text
    assert "hunter2hunter" not in text and "password=" in text
    assert text.endswith("ok password=[REDACTED:assigned-secret]")


@pytest.mark.sqlite_only  # reads the file's bytes
def test_remember_and_observe_redact_before_writing(store: MemoryStore, t0, db_path):
    key = SECRETS["openai-key"]
    m = store.remember(f"The key is {key}", now=t0)
    assert key not in m.content and m.metadata["redactions"] == ["openai-key"]
    o = store.observe("s1", "Bash", {"command": f"curl -H 'Authorization: Bearer {key}'"}, f"echo {SECRETS['github-token']}", now=t0)
    assert key not in o.content and key not in str(o.metadata)
    assert SECRETS["github-token"] not in str(o.metadata)
    store.close()
    data = db_path.read_bytes()
    assert key.encode() not in data and SECRETS["github-token"].encode() not in data


def test_plain_text_is_untouched():
    text = "We decided to use pnpm; the skeleton key idea was dropped. Tokens are counted per request."
    assert redact(text) == (text, [])


def test_the_quick_check_never_skips_a_secret():
    """redact() skips texts without any secret's fragment; the full pass must agree on every text."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from memlens.redact import _redact_all

    pieces = [*SECRETS.values(), "password=hunter2hunter", "<private>x</private>", "Bearer abcdefghijklmnopqrstu", "https://u:p@h", "plain words", " ", "\n"]

    @settings(max_examples=300, deadline=None)
    @given(st.lists(st.one_of(st.sampled_from(pieces), st.text(max_size=20)), max_size=6))
    def check(parts):
        text = "".join(parts)
        assert redact(text) == _redact_all(text)

    check()
