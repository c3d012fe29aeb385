"""Redaction of secrets before anything is written.

Applied on every ingest path (remember, observe, hooks, MCP, import). Each rule replaces what it finds with
``[REDACTED:<rule>]`` and reports where, so a person can see what was hidden without seeing the secret.

Two kinds of rule, as in gitleaks (MIT, https://github.com/gitleaks/gitleaks, ``config/gitleaks.toml``), whose rule
ids are named beside each port below:

- a token that names itself by its shape (``ghp_…``, ``AKIA…``, ``sk-ant-…``, a PEM block, a JWT);
- a value given to a setting whose name says it is secret (``DB_PASSWORD=…``, ``"SecretAccessKey": "…"``,
  ``password is …``), whatever the value looks like.

Each rule lists keywords (lower case), one of which every match contains: a rule runs only on a text holding one
of its keywords, which spares most texts every regex (redaction runs on every imported record). JSON values are
also redacted by key name (:func:`redact_value`): ``{"password": "x"}`` hides ``x`` even though ``x`` alone is
nothing.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

#: Text that redaction put there; a rule never redacts it again.
MARKER_PREFIX = "[REDACTED:"

#: Words in a setting's name that make its value a secret. ``_`` and camelCase both count as part of a name, so
#: ``DB_PASSWORD``, ``client_secret`` and ``SecretAccessKey`` are all found.
_SECRET_WORDS = (
    r"passw(?:or)?d|passphrase|passcode|pwd|secret|token|api[_.\-]?key|access[_.\-]?key|private[_.\-]?key|"
    r"signing[_.\-]?key|encryption[_.\-]?key|master[_.\-]?key|session[_.\-]?key|auth[_.\-]?key|credentials?"
)
_SECRET_NAME = re.compile(rf"(?i:{_SECRET_WORDS})", re.A)
#: Parts of a name (split at ``_``, ``-``, ``.`` and camelCase) that make a secret-sounding name hold no secret:
#: counts, limits, types, and where a secret is kept rather than the secret (``max_tokens``, ``token_uri``).
_NOT_SECRET_PARTS = frozenset(
    ["count", "counts", "length", "len", "limit", "max", "min", "size", "type", "usage", "used", "tokens", "tokenizer", "tokenizers", "file", "path", "dir", "url", "uri", "endpoint", "name", "expiry", "expires", "expire", "expiration", "ttl", "header", "field", "hint", "policy", "prompt", "reset", "required", "enabled", "rotation", "env"]
)
#: Whole parts that are secret words only on their own (``auth``, not ``author``; ``pin``, not ``spin``).
_SECRET_PARTS = frozenset(("auth", "pin"))
_NAME_PARTS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def _name_parts(name: str) -> list[str]:
    return [p.lower() for p in _NAME_PARTS.findall(name)]


#: Values that are no secret though a secret-named setting holds them: empty-ish words, references to a
#: variable, templates, masks.
_PLACEHOLDER_VALUE = re.compile(
    r"(?i)^(?:true|false|null|none|nil|undefined|yes|no|on|off|bearer|basic|string|required|optional|redacted|"
    r"\*+|x+|\.+|-+)$|^\$\{?[A-Za-z_][\w.]*\}?$|^\{\{.*\}\}$|^%[\w]+%$|^<[^<>]*>$|"
    r"^\d+(?:\.\d+)?$|^\[REDACTED:",
    re.A,
)
#: A value written as code that fetches the secret rather than the secret itself (``os.environ["X"]``).
_CODE_VALUE = re.compile(r"^(?:os\.environ|os\.getenv|process\.env|env\(|getenv|ENV\[|System\.getenv|secrets\.|vault\.)|^[A-Za-z_][\w.]*\(")
#: An absolute or relative path (``pwd: /home/me``).
_PATH_VALUE = re.compile(r"^(?:/|~/|\./|\.\./|[A-Za-z]:\\)[\w./\\-]*$")


@dataclass(frozen=True)
class Redaction:
    """One redacted span: the rule that matched and where it was in the text the rule ran on."""

    rule: str
    start: int
    end: int


@dataclass(frozen=True)
class _Rule:
    """A named pattern; only the group ``secret`` is replaced when the pattern has one (the setting's name stays
    readable), else the whole match. ``accept`` may turn a match down (a placeholder, a plain word)."""

    name: str
    regex: str
    flags: int
    keywords: tuple[str, ...]
    accept: Callable[[re.Match[str]], bool] | None = None

    @cached_property
    def pattern(self) -> re.Pattern[str]:
        """The compiled regex. Compiled on first use, not at import: ``memlens hook`` runs on every tool call of an
        agent, and most texts hold the keywords of few rules or none (compiling them all costs milliseconds)."""
        return re.compile(self.regex, self.flags)


def _plain_word(value: str) -> bool:
    """A dictionary-looking word (``expired``, ``Required``): in prose after ``token:`` it is no secret."""
    return bool(re.fullmatch(r"[A-Za-z][a-z]*|[A-Z]+", value))


def _assigned_value(match: re.Match[str]) -> bool:
    """Whether a value given to a secret-named setting is a secret (not a placeholder, a count, a path or code)."""
    name_end = match.start("op")
    name_start = name_end
    text = match.string
    while name_start > 0 and (text[name_start - 1].isalnum() or text[name_start - 1] in "_.-"):
        name_start -= 1
    name = text[name_start:name_end]
    if not _NOT_SECRET_PARTS.isdisjoint(_name_parts(name)):
        return False
    value = match.group("secret")
    if _PLACEHOLDER_VALUE.search(value):
        return False
    quoted = bool(match.group("q"))
    if not quoted and (_CODE_VALUE.search(value) or _PATH_VALUE.match(value)):
        return False
    # ``token: expired`` in prose is a word, ``password=hunter`` in a config is a value; only ``:`` is ambiguous.
    return not (not quoted and ":" in match.group("op") and "=" not in match.group("op") and _plain_word(value))


def _made_up(value: str) -> bool:
    """Whether a value looks invented rather than a word: a digit, a symbol, or mixed case after the first letter."""
    return bool(re.search(r"[0-9]|[^\w\s]|[a-z][A-Z]", value)) or not value.isascii()


def _stated_value(match: re.Match[str]) -> bool:
    """``password is S3cr3t!`` but not ``the token is expired``: the value must look made up (a digit, a symbol,
    or mixed case after the first letter)."""
    value = match.group("secret")
    if _PLACEHOLDER_VALUE.search(value) or _plain_word(value.rstrip(".,!?;:")) or _CODE_VALUE.search(value):
        return False
    return _made_up(value)


def _rule(name: str, regex: str, keywords: tuple[str, ...], flags: int = 0, accept: Callable[[re.Match[str]], bool] | None = None) -> _Rule:
    # re.A: case-insensitive matching stays ASCII, so a keyword found in text.lower() is all a match can contain.
    return _Rule(name, regex, flags | re.A, keywords, accept)


#: Where a value ends when it is not quoted.
_BARE = r"[^\s\"'`,;)}\]<>]"

# Order matters: the most specific patterns come first so a key is named by its provider.
_RULES: tuple[_Rule, ...] = (
    _rule("private", r"<private>.*?(?:</private>|\Z)", ("<private>",), re.S | re.I),
    # gitleaks private-key, widened to PGP's "PRIVATE KEY BLOCK" and to a block whose end was cut off.
    _rule(
        "private-key",
        r"-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----|\Z)",
        ("private key",),
        re.S,
    ),
    # gitleaks anthropic-api-key, anthropic-admin-api-key (any length: the key's tail may be cut).
    _rule("anthropic-key", r"\bsk-ant-[A-Za-z0-9_\-]{20,}", ("sk-ant-",)),
    # gitleaks openai-api-key (project, service-account, admin and legacy keys).
    _rule("openai-key", r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}", ("sk-",)),
    # gitleaks aws-access-token.
    _rule("aws-access-key", r"\b(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b", ("a3t", "akia", "asia", "abia", "acca")),
    _rule(
        "aws-secret-key",
        r"(?i)(?:aws_?)?secret_?access_?key[\"']?\s*(?::=|=>|=|:)\s*[\"']?(?P<secret>[A-Za-z0-9/+=]{40})",
        ("secret_access_key", "secretaccesskey", "secret_accesskey", "secretaccess_key"),
    ),
    # gitleaks github-pat, github-oauth, github-app-token, github-refresh-token, github-fine-grained-pat.
    _rule("github-token", r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,})", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_")),
    # gitleaks gitlab-pat, gitlab-deploy-token, gitlab-runner-authentication-token, gitlab-ptt, gitlab-feed-token, ...
    _rule(
        "gitlab-token",
        r"\bgl(?:pat|dt|rt|ptt|ft|imt|oas|soat|cbt|ffct|agent)-[\w\-]{20,}",
        ("glpat-", "gldt-", "glrt-", "glptt-", "glft-", "glimt-", "gloas-", "glsoat-", "glcbt-", "glffct-", "glagent-"),
    ),
    # gitleaks slack-bot-token, slack-user-token, slack-app-token, slack-legacy-*, slack-config-*.
    _rule("slack-token", r"\bxox[abposre]-[A-Za-z0-9-]{10,}|\bxapp-\d-[A-Za-z0-9-]{10,}", ("xox", "xapp-")),
    # gitleaks slack-webhook-url.
    _rule("slack-webhook", r"(?:https?://)?hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/]{20,}", ("hooks.slack.com",)),
    # gitleaks gcp-api-key.
    _rule("google-api-key", r"\bAIza[0-9A-Za-z_\-]{35}", ("aiza",)),
    # gitleaks stripe-access-token (and publishable keys).
    _rule("stripe-key", r"\b(?:sk|rk|pk)_(?:live|test|prod)_[A-Za-z0-9]{10,}", ("_live_", "_test_", "_prod_")),
    # gitleaks huggingface-access-token, huggingface-organization-api-token.
    _rule("huggingface-token", r"\b(?:hf_[A-Za-z0-9]{30,}|api_org_[A-Za-z0-9]{30,})", ("hf_", "api_org_")),
    # gitleaks npm-access-token, pypi-upload-token, rubygems-api-token.
    _rule("package-registry-token", r"\bnpm_[A-Za-z0-9]{36}\b|\bpypi-AgEIcHlwaS5vcmc[\w-]{50,}|\brubygems_[a-f0-9]{48}\b", ("npm_", "pypi-", "rubygems_")),
    # gitleaks sendgrid-api-token.
    _rule("sendgrid-key", r"\bSG\.[\w\-]{16,32}\.[\w\-]{30,50}", ("sg.",)),
    # gitleaks digitalocean-pat, digitalocean-access-token, digitalocean-refresh-token.
    _rule("digitalocean-token", r"\bdo[opr]_v1_[a-f0-9]{64}", ("_v1_",)),
    # gitleaks shopify-access-token, shopify-custom-access-token, shopify-private-app-access-token, shopify-shared-secret.
    _rule("shopify-token", r"\bshp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}", ("shpat_", "shpca_", "shppa_", "shpss_")),
    # gitleaks databricks-api-token, doppler-api-token, postman-api-token, perplexity-api-key, linear-api-key,
    # age-secret-key, vault-service-token, vault-batch-token, grafana-cloud-api-token, grafana-service-account-token.
    _rule(
        "service-token",
        r"\bdapi[a-f0-9]{32}(?:-\d)?\b|\bdp\.(?:pt|st|sa|ct)\.[a-zA-Z0-9]{40,44}|\bPMAK-[a-fA-F0-9]{24}-[a-fA-F0-9]{34}|"
        r"\bpplx-[a-zA-Z0-9]{48}|\blin_api_[a-zA-Z0-9]{40}|AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}|"
        r"\bhv[sb]\.[\w-]{90,}|\bglc_[A-Za-z0-9+/]{32,}={0,3}|\bglsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}",
        ("dapi", "dp.", "pmak-", "pplx-", "lin_api_", "age-secret-key-", "hvs.", "hvb.", "glc_", "glsa_"),
    ),
    # gitleaks telegram-bot-api-token (without its keyword: the shape is distinctive enough).
    _rule("telegram-bot-token", r"\b\d{8,10}:AA[\w-]{33}\b", (":aa",)),
    # gitleaks jwt (the signature may be missing or cut).
    _rule("jwt", r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*", ("eyj",)),
    _rule("bearer-token", r"(?i)\bbearer\s+[A-Za-z0-9._~+/\-]{16,}=*", ("bearer",)),
    # gitleaks curl-auth-header, generalised to any Authorization header or setting.
    _rule(
        "authorization-header",
        r"(?i)\b(?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?(?:(?:basic|bearer|token|digest|apikey|api-key)\s+)?(?P<secret>[A-Za-z0-9._~+/\-]{8,}={0,2})",
        ("authorization",),
        accept=lambda m: not _plain_word(m.group("secret")) and not _PLACEHOLDER_VALUE.search(m.group("secret")),
    ),
    # The password of a URL (``redis://:pw@host``, ``postgres://u:p@ss@db``): up to the last @ before the host.
    _rule("url-credentials", r"(?<=://)[^\s/:@]*:(?P<secret>[^\s/]+)(?=@[^\s/@]+(?:[/\s?#'\"),;]|$))", ("://",)),
    # A value given to a secret-named setting: ``DB_PASSWORD=x``, ``"client_secret": "x"``, ``token: x``,
    # ``--password x`` (gitleaks generic-api-key, whose name part is narrowed to secret words and whose value
    # part is checked in Python instead of by entropy).
    _rule(
        "assigned-secret",
        rf"(?i)(?:{_SECRET_WORDS})[\w.\-]*(?P<op>\\?[\"']?\s*(?::=|=>|\?=|=|:(?!//)|>(?=[^<\s])|\s(?=\s*[\"'`])|(?<=[a-z])\s(?=\S))\s*(?P<q>\\?[\"'`])?)"
        rf"(?P<secret>(?(q)[^\"'`\\\n]{{4,300}}|{_BARE}{{4,300}}))",
        ("passw", "passphrase", "passcode", "pwd", "secret", "token", "key", "credential"),
        accept=lambda m: _assigned_value(m) and (bool(re.search("[=:>]", m.group("op"))) or _flag_before(m) or _made_up(m.group("secret"))),
    ),
    # A secret said in words: "password is S3cr3t!", "the token for prod was ab12…", "密码是…".
    _rule(
        "stated-secret",
        r"(?i)\b(?:password|passphrase|passcode|pin|secret|token|api key|secret key|access key)"
        r"(?:\s+(?:for|of|on|to)(?:\s+\S{1,40}){1,3}?)?\s+(?:is|was|=|:|is:)\s+(?:now\s+)?[\"'`]?(?P<secret>[^\s\"'`]{4,300})",
        ("password", "passphrase", "passcode", "pin", "secret", "token", "api key", "secret key", "access key"),
        accept=_stated_value,
    ),
    _rule(
        "stated-secret",
        r"(?i)(?:密码|口令|密钥|令牌|パスワード|비밀번호|пароль|contraseña|mot de passe|passwort|kennwort|senha|wachtwoord)"
        r"\s*(?:是|为|為|は|은|는|:|：|=|es|est|ist|é|is)\s*[\"'“「]?(?P<secret>[^\s\"'”」，。,；;、]{4,300})",
        ("密码", "口令", "密钥", "令牌", "パスワード", "비밀번호", "пароль", "contraseña", "mot de passe", "passwort", "kennwort", "senha", "wachtwoord"),
    ),
)


def _flag_before(match: re.Match[str]) -> bool:
    """A name followed by a space is a setting only as a command-line flag (``--password x``), not in prose."""
    start = match.start()
    text = match.string
    while start > 0 and (text[start - 1].isalnum() or text[start - 1] in "_-"):
        start -= 1
    return text.startswith("--", start) or (text.startswith("-", start) and start + 1 < len(text) and text[start + 1] != "-")


#: Every rule keyword once, with the positions (in :data:`_RULES`) of the rules that list it. One substring test per
#: keyword is all most texts cost (an import redacts every record): a single pass over this list, not one per rule.
_KEYWORD_RULES: tuple[tuple[str, tuple[int, ...]], ...] = tuple(
    (keyword, tuple(i for i, r in enumerate(_RULES) if keyword in r.keywords))
    for keyword in dict.fromkeys(k for r in _RULES for k in r.keywords)
)
_KEYWORDS = tuple(k for k, _ in _KEYWORD_RULES)
_RULES_OF = dict(_KEYWORD_RULES)


@functools.cache
def _keyword_gates() -> tuple[tuple[str, re.Pattern[str]], ...]:
    """Patterns that find a keyword in a text exactly when one is there, cheaper than testing all of them.

    Only keywords holding no shorter keyword need looking for (``secret_access_key`` holds ``secret``). They are
    grouped by a character that is rare in prose (``_``, ``-``, a digit, a non-Latin letter), so a group is
    searched only when its character occurs; words of plain letters form one group searched always."""

    def guard(keyword: str) -> str:
        return next((c for c in keyword if not (c.isascii() and c.isalpha()) and c not in ". "), "")

    minimal = [k for k in _KEYWORDS if not any(other != k and other in k for other in _KEYWORDS)]
    groups: dict[str, list[str]] = {}
    for keyword in minimal:
        groups.setdefault(guard(keyword), []).append(keyword)
    # Compiled on first use, like the rules: the hook imports this module on every tool call.
    return tuple((g, re.compile(_trie_pattern(words))) for g, words in groups.items())


def _trie_pattern(words: list[str]) -> str:
    """A pattern matching exactly where one of ``words`` starts, with shared beginnings factored out
    (``ke(?:nnwort|y)`` rather than ``kennwort|key``): at each place of the text the regex engine then tries one
    branch a first letter instead of every word, which makes the search over plain prose about a third cheaper."""
    trie: dict[str, Any] = {}
    for word in words:
        node = trie
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}

    def pattern(node: dict[str, Any]) -> str:
        branches = ["" if ch == "" else re.escape(ch) + pattern(child) for ch, child in sorted(node.items())]
        return branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"

    return pattern(trie)


def _rules_for(lowered: str) -> list[_Rule]:
    """The rules, in order, that have a keyword in ``lowered`` (the rules that could match at all)."""
    if not any((not g or g in lowered) and p.search(lowered) for g, p in _keyword_gates()):
        return []
    present = [k for k in _KEYWORDS if k in lowered]
    if not present:
        return []
    return [_RULES[i] for i in sorted({i for k in present for i in _RULES_OF[k]})]


def redact(text: str) -> tuple[str, list[Redaction]]:
    """``text`` with secrets replaced by ``[REDACTED:<rule>]``, and the list of what was replaced.

    Idempotent: redacting a redacted text changes nothing and reports nothing."""
    rules = _rules_for(text.lower())
    if not rules:
        return text, []
    return _apply(rules, text)


def _redact_all(text: str) -> tuple[str, list[Redaction]]:
    """Every rule applied in turn, keywords or not (what :func:`redact` must agree with)."""
    return _apply(list(_RULES), text)


def _apply(rules: list[_Rule], text: str) -> tuple[str, list[Redaction]]:
    found: list[Redaction] = []
    for rule in rules:
        has_group = "secret" in rule.pattern.groupindex

        def _sub(match: re.Match[str], rule: _Rule = rule, has_group: bool = has_group) -> str:
            if rule.accept is not None and not rule.accept(match):
                return match.group(0)
            if has_group:
                start, end = match.span("secret")
                if match.string.startswith(MARKER_PREFIX, start):
                    return match.group(0)
                found.append(Redaction(rule.name, start, end))
                whole = match.group(0)
                return whole[: start - match.start()] + f"[REDACTED:{rule.name}]" + whole[end - match.start() :]
            found.append(Redaction(rule.name, match.start(), match.end()))
            return f"[REDACTED:{rule.name}]"

        text = rule.pattern.sub(_sub, text)
    return text, found


#: The rule named when a value is hidden because of the key it is stored under.
SECRET_FIELD = "secret-field"
#: Keys whose numbers are secrets too (a numeric password or PIN), unlike ``token`` keys, which often count.
_NUMERIC_SECRET_NAME = re.compile(r"(?i)passw|pwd|passcode|secret|\bpin\b", re.A)
#: Keys of a name/value pair (``{"name": "DB_PASSWORD", "value": "…"}`` in Kubernetes, ECS, GitHub env lists).
_PAIR_NAME_KEYS = ("name", "Name", "key", "Key")
_PAIR_VALUE_KEYS = ("value", "Value")


def is_secret_name(name: str) -> bool:
    """Whether a setting or JSON key called ``name`` holds a secret (``password``, ``DB_PASSWORD``,
    ``SecretAccessKey``, ``private_key_id``), and not a count, limit, type or place (``max_tokens``, ``token_uri``)."""
    parts = _name_parts(name)
    return (bool(_SECRET_NAME.search(name)) or not _SECRET_PARTS.isdisjoint(parts)) and _NOT_SECRET_PARTS.isdisjoint(parts)


def _redact_field(value: Any, key: str) -> tuple[Any, set[str]]:
    """A scalar stored under a secret-named key: its secrets by shape, or the whole value when no shape is seen."""
    if isinstance(value, str):
        text, found = redact(value)
        if text != value:
            return text, {f.rule for f in found}
        if not value.strip() or (_PLACEHOLDER_VALUE.search(value.strip()) and not value.strip().isdigit()):
            return value, set()
        return f"[REDACTED:{SECRET_FIELD}]", {SECRET_FIELD}
    if isinstance(value, (int, float)) and not isinstance(value, bool) and _NUMERIC_SECRET_NAME.search(key):
        return f"[REDACTED:{SECRET_FIELD}]", {SECRET_FIELD}
    return value, set()


def redact_value(value: Any) -> tuple[Any, set[str]]:
    """A JSON value with every string in it redacted, and the rules that changed something.

    Strings are redacted by shape; a string or number stored under a secret-named key (see :func:`is_secret_name`)
    is hidden whole, as is the ``value`` of a ``{"name": "DB_PASSWORD", "value": …}`` pair. Keys become strings,
    tuples become lists; the result is safe to store as JSON."""
    if isinstance(value, str):
        text, found = redact(value)
        return text, ({f.rule for f in found} if text != value else set())
    if isinstance(value, (list, tuple)):
        pairs = [redact_value(v) for v in value]
        return [v for v, _ in pairs], set().union(*(r for _, r in pairs))
    if isinstance(value, dict):
        if not value:
            return {}, set()  # most records' metadata: nothing to look at
        rules: set[str] = set()
        out: dict[str, Any] = {}
        pair_name = next((value[k] for k in _PAIR_NAME_KEYS if isinstance(value.get(k), str)), None)
        secret_pair = isinstance(pair_name, str) and is_secret_name(pair_name)
        for key, item in value.items():
            name = str(key)
            if not isinstance(item, (dict, list, tuple)) and (is_secret_name(name) or (secret_pair and name in _PAIR_VALUE_KEYS)):
                out[name], found_rules = _redact_field(item, pair_name if secret_pair and name in _PAIR_VALUE_KEYS else name)  # type: ignore[arg-type]
            else:
                out[name], found_rules = redact_value(item)
            rules |= found_rules
        return out, rules
    return value, set()


def redact_text(text: str) -> str:
    """Just the redacted text."""
    return redact(text)[0]
