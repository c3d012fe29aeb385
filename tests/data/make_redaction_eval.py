"""Write the labelled redaction set: fake secrets of real shapes, and look-alikes that are no secret.

Run ``python tests/data/make_redaction_eval.py`` to regenerate ``core/data/redaction_eval.jsonl`` (shipped in the
wheel so ``memlens redact-check --eval`` works anywhere). The output is deterministic (fixed seed);
tests/test_redact_eval.py checks the committed file matches what this script writes.

Every secret here is made up: random characters in the shape of a provider's key, never a real credential. Each
line is ``{"label": "secret"|"lookalike", "kind": ..., "text": ..., "secret": ...}``; ``secret`` is the part
that must not survive redaction (look-alikes have none, and must come out unchanged).
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import string
import sys
import uuid
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parents[2] / "core" / "data" / "redaction_eval.jsonl"
ALNUM = string.ascii_letters + string.digits
UPPER_DIGITS = string.ascii_uppercase + string.digits
HEX = "0123456789abcdef"
B64 = ALNUM + "+/"


class Maker:
    """Random fake values from one seeded generator (so the file is the same every run)."""

    def __init__(self, seed: int) -> None:
        self.r = random.Random(seed)

    def chars(self, alphabet: str, n: int) -> str:
        return "".join(self.r.choice(alphabet) for _ in range(n))

    def alnum(self, n: int) -> str:
        return self.chars(ALNUM, n)

    def hex(self, n: int) -> str:
        return self.chars(HEX, n)

    def b64(self, n: int) -> str:
        return self.chars(B64, n)

    def password(self) -> str:
        """A made-up password: letters, digits and a symbol or two (sometimes an @ or a colon-free #)."""
        return self.alnum(self.r.randint(8, 14)) + self.r.choice("!@#%^&*-_") + str(self.r.randint(0, 99))

    def uuid(self) -> str:
        return str(uuid.UUID(int=self.r.getrandbits(128), version=4))

    def pick(self, options: list[str]) -> str:
        return self.r.choice(options)


def pem(m: Maker, header: str, lines: int = 8) -> str:
    body = "\n".join(m.b64(64) for _ in range(lines))
    return f"-----BEGIN {header}-----\n{body}\n-----END {header}-----"


def jwt(m: Maker) -> str:
    head = base64.urlsafe_b64encode(json.dumps({"alg": "HS256", "typ": "JWT"}).encode()).decode().rstrip("=")
    body = base64.urlsafe_b64encode(json.dumps({"sub": m.uuid(), "iat": m.r.randint(10**9, 2 * 10**9)}).encode()).decode().rstrip("=")
    return f"{head}.{body}.{m.alnum(43)}"


CONTEXTS = [
    "use {s} for the call",
    "export it: {s}",
    "The config had {s} in it, rotate it.",
    "$ curl -s https://api.example.com -d @- <<< '{s}'",
    "note to self\n{s}\nend",
]


def secrets(m: Maker) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    def add(kind: str, text: str, secret: str) -> None:
        assert secret in text, (kind, text)
        out.append({"label": "secret", "kind": kind, "text": text, "secret": secret})

    def tokens(kind: str, make: Any, n: int = 5) -> None:
        for i in range(n):
            s = make()
            add(kind, CONTEXTS[i % len(CONTEXTS)].format(s=s), s)

    tokens("openai-key", lambda: "sk-proj-" + m.chars(ALNUM + "_-", 74) + "T3BlbkFJ" + m.chars(ALNUM + "_-", 74))
    tokens("openai-key-legacy", lambda: "sk-" + m.alnum(20) + "T3BlbkFJ" + m.alnum(20), 3)
    tokens("anthropic-key", lambda: "sk-ant-api03-" + m.chars(ALNUM + "_-", 93) + "AA")
    tokens("aws-access-key", lambda: m.pick(["AKIA", "ASIA"]) + m.chars("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16))
    tokens("github-pat", lambda: "ghp_" + m.alnum(36))
    tokens("github-other", lambda: m.pick(["gho_", "ghs_", "ghu_", "ghr_"]) + m.alnum(36), 4)
    tokens("github-fine-grained", lambda: "github_pat_" + m.chars(ALNUM + "_", 82), 3)
    tokens("gitlab-pat", lambda: "glpat-" + m.chars(ALNUM + "_-", 20), 4)
    tokens("slack-token", lambda: f"xoxb-{m.r.randint(10**10, 10**11)}-{m.r.randint(10**10, 10**11)}-{m.alnum(24)}", 4)
    tokens("slack-webhook", lambda: f"https://hooks.slack.com/services/T{m.chars(UPPER_DIGITS, 8)}/B{m.chars(UPPER_DIGITS, 8)}/{m.alnum(24)}", 3)
    tokens("google-api-key", lambda: "AIza" + m.chars(ALNUM + "_-", 35), 4)
    tokens("stripe-key", lambda: m.pick(["sk_live_", "rk_live_", "sk_test_"]) + m.alnum(24), 4)
    tokens("huggingface-token", lambda: "hf_" + m.alnum(34), 3)
    tokens("npm-token", lambda: "npm_" + m.alnum(36), 3)
    tokens("pypi-token", lambda: "pypi-AgEIcHlwaS5vcmc" + m.chars(ALNUM + "_-", 70), 2)
    tokens("sendgrid-key", lambda: f"SG.{m.chars(ALNUM + '_-', 22)}.{m.chars(ALNUM + '_-', 43)}", 3)
    tokens("digitalocean-token", lambda: "dop_v1_" + m.hex(64), 2)
    tokens("shopify-token", lambda: "shpat_" + m.hex(32), 2)
    tokens("databricks-token", lambda: "dapi" + m.hex(32), 2)
    tokens("vault-token", lambda: "hvs." + m.chars(ALNUM + "_-", 95), 2)
    tokens("age-secret-key", lambda: "AGE-SECRET-KEY-1" + m.chars("QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", 58), 2)
    tokens("telegram-bot-token", lambda: f"{m.r.randint(10**8, 10**9)}:AA{m.chars(ALNUM + '_-', 33)}", 2)
    tokens("jwt", lambda: jwt(m), 5)

    for _ in range(4):
        s = m.chars(ALNUM + "/+", 40)
        add("aws-secret-key", m.pick([f"aws_secret_access_key = {s}", f"AWS_SECRET_ACCESS_KEY={s}", f'{{"AccessKeyId": "AKIA...", "SecretAccessKey": "{s}"}}']), s)
    for key in ("RSA PRIVATE KEY", "OPENSSH PRIVATE KEY", "EC PRIVATE KEY", "PRIVATE KEY", "ENCRYPTED PRIVATE KEY"):
        block = pem(m, key)
        secret = block.splitlines()[3]
        add("private-key", f"here is the deploy key:\n{block}\nthanks", secret)
    for _ in range(3):
        block = pem(m, "PGP PRIVATE KEY BLOCK", 10)
        add("pgp-private-key", f"gpg --export-secret-keys gave\n{block}", block.splitlines()[5])
    for _ in range(3):
        key_id = m.hex(40)
        block = pem(m, "PRIVATE KEY").replace("\n", "\\n")
        doc = json.dumps({"type": "service_account", "project_id": "demo-project", "private_key_id": key_id}) [:-1] + f', "private_key": "{block}"}}'
        add("gcp-private-key-id", doc, key_id)
        add("gcp-private-key", doc, block.split("\\n")[2])

    for _ in range(3):
        s = m.alnum(40)
        add("bearer-header", f"curl -H 'Authorization: Bearer {s}' https://api.example.com/v1/items", s)
    for _ in range(3):
        s = base64.b64encode(f"admin:{m.password()}".encode()).decode()
        add("basic-auth-header", f"Authorization: Basic {s}", s)

    for _ in range(3):
        pw = m.alnum(12)
        add("url-credentials", f"DATABASE_URL=postgres://app:{pw}@db.internal:5432/app", pw)
    for _ in range(3):
        pw = m.alnum(16)
        add("url-credentials-no-user", f"REDIS_URL=redis://:{pw}@cache:6379/0", pw)
    for _ in range(3):
        pw = m.alnum(6) + "@" + m.alnum(6)
        add("url-credentials-at-sign", f"mongodb+srv://svc:{pw}@cluster0.example.net/test", pw)

    env_names = ["DB_PASSWORD", "POSTGRES_PASSWORD", "MYSQL_ROOT_PASSWORD", "client_secret", "SECRET_KEY", "API_KEY", "JWT_SECRET",
                 "GITHUB_TOKEN", "SLACK_SIGNING_SECRET", "REDIS_PASSWORD", "SMTP_PASS_WORD".replace("_WORD", "WORD"), "ENCRYPTION_KEY"]
    for name in env_names:
        s = m.pick([m.password(), m.alnum(32), "v1." + m.hex(40)])
        add("env-assignment", m.pick([f"{name}={s}", f"export {name}={s}", f'{name}="{s}"', f"  {name}: {s}"]), s)
    for name in ("password", "apiKey", "client_secret", "accessToken", "privateKey", "auth_token"):
        s = m.password()
        add("json-field", json.dumps({"user": "deploy", name: s}), s)
    for name in ("password", "secret", "api_key", "token"):
        s = m.password()
        add("yaml-field", f"database:\n  host: db\n  {name}: {s}\n", s)
    for flag in ("--password", "--token", "--api-key", "--client-secret"):
        s = m.password()
        add("cli-flag", f"mytool login {flag} {s} --verbose", s)
    for _ in range(6):
        s = m.password()
        add("natural-language", m.pick([f"the password is {s}", f"Password was {s} until Friday", f"my token: {s}",
                                       f"the password for the staging db is {s}", f"api key is {s}", f"secret: {s}"]), s)
    for _ in range(5):
        s = m.password()
        add("natural-language-intl", m.pick([f"密码是{s}", f"数据库密码：{s}", f"パスワードは{s}", f"Das Passwort ist {s}", f"la contraseña es {s}"]), s)
    for _ in range(3):
        s = m.password().replace(";", "")
        add("connection-string", f"Server=db.internal;Database=app;User Id=sa;Password={s};Encrypt=true", s)
    for _ in range(3):
        s = m.password()
        add("netrc", f"machine api.example.com login deploy password {s}", s)
    for _ in range(2):
        s = m.password()
        add("xml-field", f"<server><id>repo</id><username>ci</username><password>{s}</password></server>", s)
    for _ in range(3):
        s = m.alnum(12)
        add("private-tag", f"remember <private>my home address is {s}</private> please", s)
    return out


def lookalikes(m: Maker) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    def add(kind: str, text: str) -> None:
        out.append({"label": "lookalike", "kind": kind, "text": text, "secret": None})

    for _ in range(15):
        sha = m.hex(40)
        add("git-sha", m.pick([f"commit {sha}", f"Merge {sha[:12]} into main", f"git checkout {sha}", f"fixed in {sha[:7]}", f"HEAD is now at {sha[:7]} docs"]))
    for _ in range(15):
        u = m.uuid()
        add("uuid", m.pick([f"request id {u}", f'{{"id": "{u}", "status": "ok"}}', f"x-request-id: {u}", f"session {u} ended", f"trace_id={u}"]))
    for _ in range(8):
        data = base64.b64encode(bytes(m.r.getrandbits(8) for _ in range(m.r.randint(60, 300)))).decode()
        add("base64-image", m.pick([f'<img src="data:image/png;base64,{data}">', f"![chart](data:image/jpeg;base64,{data})", f"background: url(data:image/gif;base64,{data})"]))
    for _ in range(12):
        digest = base64.b64encode(hashlib.sha512(m.alnum(10).encode()).digest()).decode()
        add("lockfile-integrity", m.pick([f'"integrity": "sha512-{digest}",', f"  integrity sha512-{digest}", f'integrity="sha512-{digest}" crossorigin="anonymous"']))
    for _ in range(10):
        digest = hashlib.sha256(m.alnum(10).encode()).hexdigest()
        add("lockfile-hash", m.pick([f'{{file = "pkg-1.2.{m.r.randint(0, 9)}.tar.gz", hash = "sha256:{digest}"}}', f"    --hash=sha256:{digest}",
                                     f"golang.org/x/text v0.3.{m.r.randint(0, 9)} h1:{base64.b64encode(bytes.fromhex(digest)).decode()}", f"{digest}  dist/app.tar.gz"]))
    for _ in range(8):
        add("docker-digest", m.pick([f"image: nginx@sha256:{m.hex(64)}", f"Digest: sha256:{m.hex(64)}", f"container {m.hex(64)} started", f"{m.hex(12)}   postgres:16   Up 3 hours"]))
    for _ in range(8):
        add("checksum", m.pick([f"md5sum: {m.hex(32)}", f'ETag: "{m.hex(32)}"', f"sha1 {m.hex(40)}", f"oid sha256:{m.hex(64)}"]))
    for _ in range(10):
        add("object-id", m.pick([f"customer cus_{m.alnum(14)} created", f"charge ch_{m.alnum(24)} succeeded", f"Slack channel C{m.chars(UPPER_DIGITS, 10)}",
                                 f"arn:aws:iam::{m.r.randint(10**11, 10**12)}:role/deploy-{m.alnum(6).lower()}", f"pod web-{m.hex(9)}-{m.alnum(5).lower()} restarted",
                                 f"ipfs://Qm{m.alnum(44)}", f"run id {m.r.randint(10**9, 10**10)} finished", f"order #{m.alnum(10).upper()}"]))
    for _ in range(8):
        add("public-key", m.pick([f"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI{m.b64(43)} me@laptop", f"ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABgQ{m.b64(300)} ci@build",
                                  pem(m, "PUBLIC KEY", 4), pem(m, "CERTIFICATE", 6)]))
    add("token-count", '"usage": {"input_tokens": 1234, "output_tokens": 567, "cache_read_input_tokens": 0}')
    add("token-count", "max_tokens: 4096")
    add("token-count", "token_count=512 tokens_per_second=38.2")
    add("token-count", '{"model": "claude", "max_tokens": 1024, "temperature": 0.2}')
    add("token-count", "Tokens are counted per request; the token limit is 200000.")
    add("setting-name", "password_min_length = 12")
    add("setting-name", '"token_type": "Bearer", "expires_in": 3599')
    add("setting-name", '"token_uri": "https://oauth2.googleapis.com/token"')
    add("setting-name", "secretName: tls-cert-prod")
    add("setting-name", 'PASSWORD_FILE=/run/secrets/db_password')
    add("setting-name", "tokenizer: cl100k_base")
    add("setting-name", "token_expiry: 3600")
    add("setting-name", "api_key_env: OPENAI_API_KEY")
    add("setting-name", "AUTH_TOKEN_HEADER=X-Auth-Token")
    add("code-reference", 'password = os.environ["DB_PASSWORD"]')
    add("code-reference", "const token = process.env.GITHUB_TOKEN;")
    add("code-reference", "api_key: ${OPENAI_API_KEY}")
    add("code-reference", "DB_PASSWORD=${DB_PASSWORD:?missing}".replace(":?missing", ""))
    add("code-reference", "secret = get_secret('prod/db')")
    add("code-reference", "password: {{ vault_db_password }}")
    add("code-reference", "password=<your password here>")
    add("code-reference", "PASSWORD=********")
    add("code-reference", "token: null")
    add("code-reference", "password: true")
    for text in (
        "the token is expired, log in again",
        "reset your password from the settings page",
        "Password is required",
        "the secret to good caching is invalidation",
        "We decided to use pnpm; the skeleton key idea was dropped.",
        "The API key rotation runs every 90 days.",
        "pwd: /home/me/project",
        "$ pwd\n/home/me/project",
        "authorization: required for admin routes",
        "Authorization header missing",
        "The bearer of this letter is a friend.",
        "see https://user@example.com/docs and git@github.com:org/repo.git",
        "https://example.com:8080/path?q=1#frag",
        "mail me at someone@example.com",
        "version 1.2.3-beta.4+build.5678",
        "GA tag G-ABCD1234EF and UA-12345678-1",
        "the key insight is that passwords should be hashed with argon2",
        "token bucket rate limiter: 100 tokens per minute",
        "passphrase-protected keys are safer",
        "密码错误，请重试",
    ):
        add("prose", text)
    for _ in range(40):
        add("random-id", m.pick([f"build {m.alnum(20)} done", f"upload id {m.chars(string.ascii_lowercase + string.digits, 26)}", f"nonce {m.hex(32)}",
                                 f"cache key {m.hex(16)}-{m.hex(16)}", f"job/{m.alnum(12)}/artifact-{m.hex(8)}.zip", f"ref: refs/heads/feature-{m.alnum(8).lower()}",
                                 f"span {m.hex(16)} parent {m.hex(16)}", f"ulid 01{m.chars('0123456789ABCDEFGHJKMNPQRSTVWXYZ', 24)}"]))
    return out


def build(seed: int = 20240601) -> list[dict[str, Any]]:
    m = Maker(seed)
    return secrets(m) + lookalikes(m)


def render(records: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else OUT
    target.parent.mkdir(parents=True, exist_ok=True)
    records = build()
    target.write_text(render(records), encoding="utf-8")
    counts = {label: sum(r["label"] == label for r in records) for label in ("secret", "lookalike")}
    print(f"wrote {target}: {counts['secret']} secrets, {counts['lookalike']} look-alikes")
