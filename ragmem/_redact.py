"""Secrets kept out of memory (invariant 13): keys, tokens, passwords and private keys become a marker naming their kind.

Every door stores through :meth:`ragmem.Memory.add_many`, which runs :func:`redact_message` on each
checked message before the log, the lexical index or the vectors see it (unless the store's owner turned
redaction off: ``redact = false`` in ``ragmem.toml``, or ``Memory(redact=False)``). A secret becomes
``[redacted: KIND]``, ``KIND`` one of :data:`KINDS`; the message's metadata then says how many of each kind
were taken out (``metadata["redacted"] = {"aws-access-key-id": 1}``), so a caller of ``add`` can tell.

What is found, and by what:

* The shapes of ``detect-secrets`` (Yelp's scanner, a pinned dependency), run on the text itself: cloud and
  provider keys (AWS, Azure storage, GitHub, GitLab, Slack, Stripe, Telegram, Discord, SendGrid, Twilio,
  Mailchimp, npm, PyPI, Square, Artifactory, OpenAI's older keys), JSON web tokens, and the password of a URL
  (``scheme://user:password@host``). Its plugins are used as regular expressions only: nothing is verified
  against a service (no network), and its entropy and keyword plugins are left out, since they take git
  hashes, base64 images, lockfile integrity strings and ordinary code for secrets (see docs/api.md).
* The shapes transcripts show that it does not: whole ``-----BEGIN ... PRIVATE KEY-----`` blocks, ``Bearer``
  and ``Authorization:`` credentials, newer provider keys (OpenAI ``sk-proj-``, Anthropic ``sk-ant-``, GitHub
  ``github_pat_``, Google ``AIza``/``ya29.``/``GOCSPX-``, Hugging Face ``hf_``, Stripe test and webhook
  secrets, Slack app tokens, Azure connection strings and client secrets, Groq, xAI...), a token as a URL's
  user (``https://TOKEN@github.com``) or query parameter (``?access_token=``, ``&sig=``), and assignments to
  secret-sounding names (``DB_PASSWORD=...``, ``"api_key": "..."``, ``password: ...``, ``--token ...``).

Placeholders stay verbatim, and so do the near-misses of secrets: ``user:password@localhost`` of a
template, ``changeme``, ``xxx``, ``<your-key>``, ``sk-...``, ``${VAR}``, ``$TOKEN``, ``YOUR_API_KEY``,
AWS's documented ``...EXAMPLE`` keys; git commit hashes, UUIDs, base64 images, ``sha512-...`` integrity
strings and sha256 digests match no rule. The detector runs in-process and offline; its regular
expressions load on the first message (``detect-secrets`` imports in about 0.1 s).

>>> redact_text("AWS_SECRET_ACCESS_KEY=" + "wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "zq8Fh2Lk9T")[0]
'AWS_SECRET_ACCESS_KEY=[redacted: aws-secret-access-key]'
>>> redact_text("postgres://user:password@localhost:5432/app")[0]
'postgres://user:password@localhost:5432/app'
"""

from __future__ import annotations

import json
import re
import threading
from collections import Counter
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable, Mapping, Pattern

from ._messages import Message

__all__ = ["KINDS", "MARKER", "Found", "find", "marker", "redact_message", "redact_text", "redact_value", "redacted_counts"]

#: What a secret is replaced by; ``{kind}`` is one of :data:`KINDS`.
MARKER = "[redacted: {kind}]"
#: The metadata key of a message that says what was redacted from it: ``{kind: count}``.
METADATA_KEY = "redacted"


def marker(kind: str) -> str:
    """The marker that stands where a secret of ``kind`` was."""
    return MARKER.format(kind=kind)


@dataclass(frozen=True)
class Found:
    """One secret in a text: where it is (``text[start:end]``) and its kind."""

    start: int
    end: int
    kind: str


@dataclass(frozen=True)
class _Rule:
    """A regular expression for one kind of secret.

    ``group``: the group holding the secret (0: the whole match; None: every non-empty group, as
    detect-secrets' plugins read theirs). ``hints``: substrings one of which the text must hold for the
    rule to run (a cheap test before the scan; ``lower`` hints are looked for in the lower-cased text).
    ``check``: the secret's value must pass it. ``widen``: the secret runs on over token characters
    (a rule that matches a key's first characters still takes the whole key).
    """

    kind: str
    regex: Pattern[str]
    group: int | None = 0
    hints: tuple[str, ...] = ()
    lower: bool = False
    check: Callable[[str], bool] | None = None
    widen: bool = True
    priority: int = 1


# ---------------------------------------------------------------- placeholders and near-misses

_PLACEHOLDER_WORDS = frozenset("""
password passwd passphrase pass pwd secret secrets token tokens apikey api_key api-key key keys changeme change_me
change-me changeit changethis example examples sample placeholder redacted hidden masked none null nil undefined
true false dummy fake test testing tests foo bar baz foobar string str text bool boolean int integer number float
object any secretstr optional required value values default mypassword mysecret mytoken yourpassword yourtoken
user username admin root guest empty blank todo fixme tbd replace_me replaceme insert_here your_key your_token
""".split())
_PLACEHOLDER_PARTS = re.compile(
    r"example|placeholder|changeme|change_me|replace[_-]?me|replace[_-]?with|dummy|redacted|"
    r"(?:^|[^a-z])(?:your|my|the|enter|insert|put|add|fake|test|sample|some)[-_ ]?(?:own[-_ ]?)?"
    r"(?:[a-z]+[-_ ])?(?:api[-_ ]?)?(?:key|token|secret|pass|password|pwd)",
    re.I,
)
_TEMPLATED = re.compile(r"^\$|\$\{|\$\(|\{\{|\}\}|^\{.*\}$|<[^<>]*>|^<|>$|%\(\w+\)|^%[sd]$")
_REPEATED = re.compile(r"(.)\1*|(.)(.)(?:\2\3)+\2?", re.S)  # "xxxx", "****", "0000", "abab"
_SEQUENTIAL = ("abcdefghijklmnopqrstuvwxyz", "0123456789012345678901234567890123456789", "qwertyuiop")


def placeholder(value: str) -> bool:
    """True when ``value`` stands for a secret rather than being one: ``changeme``, ``xxx``, ``<your-key>``,
    ``sk-...``, ``${VAR}``, ``$TOKEN``, ``YOUR_API_KEY``, ``password``, an ``...EXAMPLE`` key, a marker."""
    v = value.strip().strip("\"'`")
    low = v.lower()
    if len(v) < 3 or low.startswith("[redacted"):
        return True
    if _TEMPLATED.search(v) or "..." in v or "\u2026" in v or "***" in v:
        return True  # templated (<key>, {{key}}, ${KEY}, $KEY, %(key)s) or elided (sk-..., ab***yz)
    if low in _PLACEHOLDER_WORDS or _REPEATED.fullmatch(low):
        return True
    if re.fullmatch(r"[x*#._\-]+|x+[-_]?x*|[0-9._\-]{1,5}", low):
        return True
    core = re.sub(r"^(?:sk|pk|rk|ghp|gho|xox[a-z]|hf|npm|glpat)[-_]+", "", low)
    if len(core) >= 6 and any(core in seq for seq in _SEQUENTIAL):
        return True  # abcdef..., 123456...
    return bool(_PLACEHOLDER_PARTS.search(v))


def _secretish(value: str, *, min_len: int = 8) -> bool:
    """A value that looks like a generated secret: long enough, not a placeholder, with a digit (or long and
    mixed in case), no spaces."""
    if len(value) < min_len or any(c.isspace() for c in value) or placeholder(value):
        return False
    has_digit = any(c.isdigit() for c in value)
    has_alpha = any(c.isalpha() for c in value)
    if has_digit and has_alpha:
        return True
    return has_alpha and len(value) >= 16 and any(c.isupper() for c in value) and any(c.islower() for c in value)


def _strong(value: str) -> bool:
    """A value no one would mistake for a name in code: long, with several digits and letters, not snake_case
    (``token=a8f5f167f44f4964e6c998dee827110c`` in a log line, not ``token=refresh_token_v2``)."""
    return (len(value) >= 16 and sum(c.isdigit() for c in value) >= 3 and sum(c.isalpha() for c in value) >= 3
            and not re.fullmatch(r"[A-Za-z]+(?:[_.][A-Za-z0-9]+)+", value) and _secretish(value))


def _not_placeholder(value: str) -> bool:
    return not placeholder(value)


# ---------------------------------------------------------------- the rules

_SETTING_PREFIX = re.compile(r"[A-Za-z]+=")
_TOKEN_CHARS = re.compile(r"[A-Za-z0-9_\-]")
_PEM_BEGIN = re.compile(r"-----BEGIN ((?:[A-Z0-9]+ )*)PRIVATE KEY( BLOCK)?-----")
#: The body of a key block whose END line is missing (a file read in part): base64 lines, escaped or not.
_PEM_BODY = re.compile(r"(?:[A-Za-z0-9+/=\r\n\t ]|\\[nrt]|Proc-Type:[^\n\\]*|DEK-Info:[^\n\\]*)*")
_PEM_MAX = 64_000  # the largest key block (an 8192-bit RSA key in PEM is under 7,000 characters)

#: Names of settings that hold a secret (``DB_PASSWORD``, ``api_key``, ``clientSecret``, ``X-Api-Key``):
#: detect-secrets' keyword list, with tokens and credentials.
_KEYWORD = (r"(?:pass(?:word|wd|phrase)?(?![a-z])|pwd|secret|token|api[_-]?key|apikey|access[_-]?key|auth[_-]?key|"
            r"private[_-]?key|priv[_-]?key|client[_-]?key|credentials?|contrase(?:ñ|n)a)")
_NAME = re.compile(r"[A-Za-z0-9_.\-]*" + _KEYWORD + r"[A-Za-z0-9_.\-]*", re.I)
#: A name ending in one of these holds something about a secret, not the secret (``max_tokens``, ``token_count``,
#: ``password_field``, ``secret_name``, ``api_key_env``, ``private_key_id``, ``OLDPWD``).
_NOT_A_SECRET = re.compile(
    r"(?:^|[_.\-]|(?<=[a-z])(?=[A-Z]))(?:name|names|id|ids|field|env|var|file|path|dir|length|len|count|type|types|"
    r"header|prefix|suffix|label|hint|policy|timeout|ttl|expir\w*|limit|min|max|enabled|required|source|url|uri|"
    r"endpoint|mode|format|size|version|usage|used|budget|tokens|input|output|location|ref|arn|hash|regex|pattern|"
    r"rotation|reset|manager|store|provider|helper|class|schema|param|params|arg|args|kind|at|by|on|cache|"
    r"estimate|estimator|counter|tokenizer|encoding|start|end|index|idx|position|pos|stats|date|time|timestamp|ts|"
    r"created|updated|expires|set|exists|valid|ok|error|status|message|msg|text|description|desc|title|help)$", re.I)
_KEYWORD_RE = re.compile(_KEYWORD, re.I)
_KEYWORD_LOWER = re.compile(_KEYWORD)
_NAME_CHAR = re.compile(r"[A-Za-z0-9_.\-]")
_NAME_RUN = re.compile(r"[A-Za-z0-9_.\-]*")
#: What follows a setting's name: a closing quote, the operator, and the value (quoted or bare).
_AFTER = re.compile(r"(?P<kq>[\"'`]?\]?)[ \t]*(?P<op>:=|=>|==?|:)[ \t]*(?P<q>[\"'`]?)(?P<val>[^\s\"'`,;\\]+)(?P=q)")
_FLAG = re.compile(r"(?<![\w-])--(?P<key>[A-Za-z0-9\-]*" + _KEYWORD + r"[A-Za-z0-9\-]*)(?:=|[ \t]+)"
                   r"(?P<q>[\"']?)(?P<val>[^\s\"'`;|&\\]+)(?P=q)", re.I)
_REFERENCE = re.compile(r"[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)+|[A-Za-z_]\w*\(.*|.*[\[\]()].*|[/~.].*|[A-Za-z]:\\.*|@.*")
_DATE = re.compile(r"\d{4}-\d\d-\d\d|\d\d?:\d\d")  # a time, not a secret
_TYPE_WORDS = frozenset("str string int bool boolean secretstr secretbytes bytes any object none null optional "
                        "undefined true false self this required".split())


def _name_kind(key: str) -> str | None:
    """The kind of secret a setting's name says it holds (None: a name about a secret, not one)."""
    low = key.lower().strip("\"'`[]")
    if _NOT_A_SECRET.search(key.strip("\"'`[]")) or low in ("pwd", "oldpwd"):
        return None  # max_tokens, password_field; PWD and OLDPWD are the shell's working directories
    if "aws" in low and "secret" in low:
        return "aws-secret-access-key"
    if re.search(r"pass|pwd|contrase", low):
        return "password"
    if re.search(r"priv[_-]?key|private[_-]?key", low):
        return "private-key"
    if "token" in low:
        return "token"
    if re.search(r"api[_-]?key|apikey|access[_-]?key|auth[_-]?key|client[_-]?key", low):
        return "api-key"
    return "secret"


def _assigned(kind: str, value: str) -> bool:
    """Whether ``value``, assigned to a name of ``kind``, is a secret (not a reference, type, path or placeholder)."""
    v = value.strip("\"'`")
    if not v or placeholder(v) or v.lower() in _TYPE_WORDS or _REFERENCE.fullmatch(v) or _DATE.match(v):
        return False
    if kind == "password":
        # not a number, a version or a time (``PASSWORD_RESET_TIMEOUT=3600`` names none of them a password)
        return (len(v) >= 4 and not re.fullmatch(r"[\d.,:\-]+", v)) or _secretish(v)
    return _secretish(v)


def _line_start(text: str, at: int) -> bool:
    """True when only indentation, ``export``, ``set``, a list dash or a quote precedes ``at`` on its line."""
    escaped = text.rfind("\\n", 0, at)  # a line break escaped inside JSON text counts as one
    start = max(text.rfind("\n", 0, at) + 1, escaped + 2 if escaped >= 0 else 0)
    return re.fullmatch(r"[ \t]*(?:export[ \t]+|set[ \t]+|-[ \t]+|\$env:|#[ \t]*)?[\"']?", text[start:at]) is not None


def _assignments(text: str, lower: str) -> Iterable[Found]:
    """Secrets assigned to secret-sounding names: ``.env``, YAML, JSON, code, headers and command-line flags.

    A quoted value counts anywhere (``"api_key": "..."``, ``password = "..."``); an unquoted one only where
    configuration is written (an upper-case name, ``DB_PASSWORD=...``; a name that starts its line,
    ``password: ...``; a header in quotes, ``-H "X-Api-Key: ..."``), since in code ``password = form.password``
    names a variable.
    """
    last_key_end = -1
    # the names are looked for in the lower-cased text (a case-blind scan costs nine times as much), whose
    # positions are the text's unless lower-casing changed a length (a dotted capital I)
    hits = _KEYWORD_LOWER.finditer(lower) if len(lower) == len(text) else _KEYWORD_RE.finditer(text)
    for hit in hits:
        if hit.start() < last_key_end:
            continue  # the same name ("secret_token"), seen already
        end = last_key_end = _NAME_RUN.match(text, hit.end()).end()  # type: ignore[union-attr]
        m = _AFTER.match(text, end)
        if m is None:  # most mentions ("the token expired") assign nothing: the name's start is not needed
            continue
        start = hit.start()
        while start > 0 and _NAME_CHAR.match(text[start - 1]):
            start -= 1
        if text.endswith("://", 0, start):
            continue  # a URL's user (https://x-access-token:...@host): the URL rules' to read
        key, val, quoted = text[start:end], m.group("val"), bool(m.group("q"))
        kind = _name_kind(key)
        if kind is None or (m.group("op") == "=>" and not quoted):
            continue
        if not quoted:
            bare = key.strip("\"'`")
            env_style = bare.upper() == bare and any(c.isalpha() for c in bare)
            header = start > 0 and text[start - 1] in "\"'" and "-" in bare
            strong = _strong(val)
            if not (env_style or header or strong or _line_start(text, start)):
                continue
            nl = text.find("\n", m.end("val"))
            rest = text[m.end("val"):nl if nl >= 0 else len(text)]
            if rest.strip() and not re.match(r"[ \t]*(?:#|//|\\n|\"|'|&&|;|\||$)", rest) and not (env_style or strong):
                continue  # a value followed by more code (``password: hashed,``) is an expression, not a setting
        if _assigned(kind, val):
            yield Found(m.start("val"), m.end("val"), kind)
    for m in _FLAG.finditer(text) if "--" in text else ():
        kind = _name_kind(m.group("key"))
        if kind is not None and _assigned(kind, m.group("val")):
            yield Found(m.start("val"), m.end("val"), kind)


def _private_keys(text: str) -> Iterable[Found]:
    """Whole private key blocks, BEGIN line to END line (in a file read whole, or escaped inside JSON)."""
    for m in _PEM_BEGIN.finditer(text):
        end_line = f"-----END {m.group(1)}PRIVATE KEY{m.group(2) or ''}-----"
        end = text.find(end_line, m.end(), m.end() + _PEM_MAX)
        if end >= 0:
            yield Found(m.start(), end + len(end_line), "private-key")
        else:  # cut short: up to where the key's body ends
            body = _PEM_BODY.match(text, m.end())
            yield Found(m.start(), body.end() if body else m.end(), "private-key")


def _own_rules() -> list[_Rule]:
    """The shapes detect-secrets does not know, as transcripts show them."""
    tok = r"[A-Za-z0-9_\-]"
    return [
        _Rule("anthropic-api-key", re.compile(r"sk-ant-(?:api|admin|oat)?\d*-?" + tok + r"{20,}"), hints=("sk-ant-",),
              priority=3),
        _Rule("openai-api-key", re.compile(r"sk-(?:proj|svcacct|admin|None)-" + tok + r"{20,}"), hints=("sk-",),
              check=_not_placeholder, priority=3),
        _Rule("api-key", re.compile(r"(?<![\w-])sk-[A-Za-z0-9]{32,}(?![\w-])"), hints=("sk-",), check=_secretish),
        _Rule("github-token", re.compile(r"github_pat_[A-Za-z0-9_]{22,}"), hints=("github_pat_",), priority=3),
        _Rule("google-api-key", re.compile(r"AIza[0-9A-Za-z_\-]{35}"), hints=("AIza",), priority=3),
        _Rule("google-oauth-token", re.compile(r"ya29\.[0-9A-Za-z_\-]{20,}"), hints=("ya29.",), priority=3),
        _Rule("google-oauth-secret", re.compile(r"GOCSPX-[0-9A-Za-z_\-]{20,}"), hints=("GOCSPX-",), priority=3),
        _Rule("huggingface-token", re.compile(r"(?<![\w-])hf_[A-Za-z0-9]{30,}"), hints=("hf_",), check=_secretish,
              priority=3),
        _Rule("npm-token", re.compile(r"(?<![\w-])npm_[A-Za-z0-9]{36}"), hints=("npm_",), check=_secretish),
        _Rule("stripe-key", re.compile(r"(?:sk|rk)_(?:live|test)_[0-9a-zA-Z]{16,}|whsec_[A-Za-z0-9]{24,}"),
              hints=("_live_", "_test_", "whsec_"), check=_secretish, priority=3),
        _Rule("slack-token", re.compile(r"xapp-\d-[A-Za-z0-9\-]{20,}|xoxe\.xox[bp]-\d-[A-Za-z0-9\-]{20,}"),
              hints=("xapp-", "xoxe."), priority=3),
        _Rule("groq-api-key", re.compile(r"(?<![\w-])gsk_[A-Za-z0-9]{40,}"), hints=("gsk_",), check=_secretish),
        _Rule("xai-api-key", re.compile(r"(?<![\w-])xai-[A-Za-z0-9]{60,}"), hints=("xai-",), check=_secretish),
        _Rule("replicate-token", re.compile(r"(?<![\w-])r8_[A-Za-z0-9]{37}(?![\w-])"), hints=("r8_",), check=_secretish),
        _Rule("digitalocean-token", re.compile(r"do[opr]_v1_[a-f0-9]{64}"), hints=("_v1_",)),
        _Rule("azure-key", re.compile(r"(?:SharedAccessKey|AccountKey|Primary[Kk]ey)=([A-Za-z0-9+/=]{20,})"), group=1,
              hints=("SharedAccessKey=", "AccountKey=", "Key="), check=_not_placeholder, widen=False, priority=3),
        _Rule("azure-client-secret", re.compile(r"(?<![\w~.\-])[A-Za-z0-9_~.\-]{3}\dQ~[A-Za-z0-9_~.\-]{31,34}"),
              hints=("Q~",), widen=False, priority=3),
        _Rule("bearer-token", re.compile(r"\bbearer[ \t]+([A-Za-z0-9._~+/=\-]{16,})", re.I), group=1,
              hints=("bearer",), lower=True, check=_secretish, widen=False),
        _Rule("authorization", re.compile(
            r"\bauthorization\\?[\"']?[ \t]*[:=][ \t]*\\?[\"']?(?:token|basic|digest|apikey)[ \t]+([A-Za-z0-9._~+/=\-]{8,})",
            re.I), group=1, hints=("authorization",), lower=True, check=_secretish, widen=False),
        _Rule("url-token", re.compile(r"://([A-Za-z0-9_\-.~%]{16,})@[A-Za-z0-9]"), group=1, hints=("://",),
              check=_secretish, widen=False),
        _Rule("url-token", re.compile(
            r"[?&#](?:access_token|refresh_token|id_token|token|api_key|apikey|api-key|key|sig|signature|secret|"
            r"client_secret|password|passwd|auth|code)=([^&\s\"'#<>]{8,})", re.I), group=1, hints=("=",),
              check=_secretish, widen=False),
    ]


#: detect-secrets' plugins used, each with the kind its secrets are named by (its shape rules, no verification).
_PLUGINS: dict[str, tuple[str, tuple[str, ...], bool]] = {
    # plugin class: (kind, hints, hints are looked for in the lower-cased text)
    "AWSKeyDetector": ("aws-access-key-id", ("a3t", "abia", "acca", "akia", "asia", "aws"), True),
    "AzureStorageKeyDetector": ("azure-key", ("AccountKey=",), False),
    "BasicAuthDetector": ("url-password", ("://",), False),
    "DiscordBotTokenDetector": ("discord-bot-token", (".",), False),
    "GitHubTokenDetector": ("github-token", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), False),
    "GitLabTokenDetector": ("gitlab-token", ("gl", "GR1348941"), False),
    "JwtTokenDetector": ("jwt", ("eyJ",), False),
    "MailchimpDetector": ("mailchimp-api-key", ("-us",), False),
    "NpmDetector": ("npm-token", ("_authToken",), False),
    "OpenAIDetector": ("openai-api-key", ("T3BlbkFJ",), False),
    "PypiTokenDetector": ("pypi-token", ("pypi-",), False),
    "SendGridDetector": ("sendgrid-api-key", ("SG.",), False),
    "SlackDetector": ("slack-token", ("xox", "hooks.slack.com"), True),
    "SquareOAuthDetector": ("square-oauth-secret", ("sq0csp-",), False),
    "StripeDetector": ("stripe-key", ("_live_",), False),
    "TelegramBotTokenDetector": ("telegram-bot-token", (":",), False),
    "TwilioKeyDetector": ("twilio-api-key", ("AC", "SK"), False),
    "ArtifactoryDetector": ("artifactory-token", ("AKC", "AP"), False),
}


def _plugin_rules() -> list[_Rule]:
    """detect-secrets' regular expressions, as rules (imported on first use: it costs about 0.1 s)."""
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
    from detect_secrets.plugins.jwt import JwtTokenDetector

    classes: list[Any] = list(get_mapping_from_secret_type_to_class().values())
    by_name: dict[str, Any] = {c.__name__: c for c in classes}
    rules = []
    for name, (kind, hints, lower) in _PLUGINS.items():
        cls = by_name[name]
        for i, regex in enumerate(cls.denylist):
            k = "aws-secret-access-key" if name == "AWSKeyDetector" and i == 1 else kind
            k = "slack-webhook" if name == "SlackDetector" and i == 1 else k
            check: Callable[[str], bool] = _not_placeholder
            if cls is JwtTokenDetector:
                check = lambda v: JwtTokenDetector.is_formally_valid(v) and not placeholder(v)  # noqa: E731
            elif name == "BasicAuthDetector":
                check = lambda v: not placeholder(v) and v.lower() not in _TYPE_WORDS  # noqa: E731
            elif name in ("ArtifactoryDetector", "TwilioKeyDetector", "TelegramBotTokenDetector"):
                check = _secretish
            rules.append(_Rule(k, regex, group=None if regex.groups else 0, hints=hints, lower=lower, check=check,
                               widen=name not in ("BasicAuthDetector", "AWSKeyDetector", "NpmDetector", "SlackDetector",
                                                  "JwtTokenDetector", "ArtifactoryDetector", "AzureStorageKeyDetector"),
                               priority=1 if name == "BasicAuthDetector" else 2))  # a known key's kind wins
    return rules


_RULES: list[_Rule] = []
_RULES_LOCK = threading.Lock()


def _rules() -> list[_Rule]:
    if not _RULES:
        with _RULES_LOCK:
            if not _RULES:
                _RULES.extend(_plugin_rules() + _own_rules())
    return _RULES


# ---------------------------------------------------------------- finding and replacing

def _spans(rule: _Rule, m: re.Match[str]) -> Iterable[tuple[int, int]]:
    if rule.group is None:  # detect-secrets reads every non-empty group of a match as a secret
        groups = [g for g in range(1, (m.re.groups or 0) + 1) if m.group(g)]
        if not groups:
            yield m.span()
        for g in groups:
            yield m.span(g)
    else:
        yield m.span(rule.group)


def _widen(text: str, start: int, end: int) -> tuple[int, int]:
    """A token's whole extent around ``text[start:end]``: a rule that matched its first characters takes all."""
    while start > 0 and _TOKEN_CHARS.match(text[start - 1]):
        start -= 1
    n = len(text)
    while end < n and _TOKEN_CHARS.match(text[end]):
        end += 1
    return start, end


def find(text: str) -> list[Found]:
    """The secrets in ``text``, in order, overlapping finds merged (the most specific rule names the kind)."""
    if len(text) < 8:
        return []
    lower = text.lower()
    found: list[tuple[int, int, int, str]] = []  # start, end, priority, kind
    for rule in _rules():
        if rule.hints:
            if rule.lower:
                if not any(h in lower for h in rule.hints):
                    continue
            elif not any(h in text for h in rule.hints):
                continue
        for m in rule.regex.finditer(text):
            for start, end in _spans(rule, m):
                if end <= start or (rule.check is not None and not rule.check(text[start:end])):
                    continue
                if rule.widen:
                    start, end = _widen(text, start, end)
                elif rule.group == 0 and rule.priority == 2:  # a plugin's match that names its setting
                    named = _SETTING_PREFIX.match(text, start, end)  # (AccountKey=...): the name stays
                    start = named.end() if named else start
                found.append((start, end, rule.priority, rule.kind))
    found.extend((f.start, f.end, 4, f.kind) for f in _private_keys(text))
    found.extend((f.start, f.end, 0, f.kind) for f in _assignments(text, lower))
    if not found:
        return []
    found.sort(key=lambda f: (f[0], -f[1]))
    merged: list[list[Any]] = []
    for start, end, prio, kind in found:
        if merged and start < merged[-1][1]:  # overlaps: one secret, named by its most specific rule
            last = merged[-1]
            last[1] = max(last[1], end)
            if prio > last[2]:
                last[2], last[3] = prio, kind
        else:
            merged.append([start, end, prio, kind])
    return [Found(s, e, k) for s, e, _, k in merged]


def redact_text(text: str) -> tuple[str, Counter[str]]:
    """``text`` with each secret replaced by its marker, and how many of each kind were replaced."""
    found = find(text)
    counts: Counter[str] = Counter(f.kind for f in found)
    if not found:
        return text, counts
    out, at = [], 0
    for f in found:
        out.append(text[at:f.start])
        out.append(marker(f.kind))
        at = f.end
    out.append(text[at:])
    return "".join(out), counts


def redact_value(value: Any, counts: Counter[str] | None = None, *, key: str | None = None) -> Any:
    """A JSON value with the secrets of its strings redacted (keys kept; a string under a secret-sounding key,
    ``{"api_key": "..."}``, is redacted whole when it looks like a secret). ``counts`` is added to."""
    counts = Counter() if counts is None else counts
    if isinstance(value, str):
        if value.startswith("data:") and ";base64," in value[:100]:
            return value  # an inline image or file: base64, and no secret shape matches it
        new, n = redact_text(value)
        if not n and key is not None:
            kind = _name_kind(key) if _NAME.fullmatch(key) else None
            if kind is not None and _assigned(kind, value) and not any(c.isspace() for c in value.strip()):
                n = Counter({kind: 1})
                new = marker(kind)
        counts.update(n)
        return new
    if isinstance(value, Mapping):
        return {k: redact_value(v, counts, key=k if isinstance(k, str) else None) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_value(v, counts) for v in value]
    return value


def _arguments(arguments: str, counts: Counter[str]) -> str:
    """A tool call's arguments redacted, valid JSON kept valid (its strings are redacted, not its text)."""
    try:
        parsed = json.loads(arguments)
    except ValueError:
        new, n = redact_text(arguments)
        counts.update(n)
        return new
    mine: Counter[str] = Counter()
    clean = redact_value(parsed, mine)
    if not mine:
        return arguments  # verbatim: its spacing and escapes as the model wrote them
    counts.update(mine)
    return json.dumps(clean, ensure_ascii=False)


def redact_message(m: Message) -> Message:
    """``m`` with the secrets of its content, tool call arguments and metadata replaced by markers.

    The same message comes back (the same object) when it holds none. Otherwise its metadata's
    ``"redacted"`` says how many of each kind were taken out (added to what an earlier redaction counted).
    """
    counts: Counter[str] = Counter()
    content = m.content
    if isinstance(content, str):
        content, n = redact_text(content)
        counts.update(n)
    elif isinstance(content, list):
        content = redact_value(content, counts)
    calls = tuple(c if not c.arguments else replace(c, arguments=_arguments(c.arguments, counts)) for c in m.tool_calls)
    meta = {k: v for k, v in m.metadata.items() if k != METADATA_KEY}
    meta = redact_value(meta, counts) if meta else meta
    if not counts:
        return m
    before = m.metadata.get(METADATA_KEY)
    total = Counter({k: v for k, v in before.items() if isinstance(v, int)}) if isinstance(before, Mapping) else Counter()
    total.update(counts)
    meta[METADATA_KEY] = dict(sorted(total.items()))
    return m.with_(content=content, tool_calls=calls, metadata=meta)


def redacted_counts(m: Message) -> dict[str, int]:
    """What was redacted from a stored message, by kind (empty when nothing was)."""
    value = m.metadata.get(METADATA_KEY)
    return {k: v for k, v in value.items() if isinstance(v, int)} if isinstance(value, Mapping) else {}


#: The kinds of secret a marker may name.
KINDS = tuple(sorted({kind for kind, _, _ in _PLUGINS.values()} | {
    "aws-secret-access-key", "slack-webhook", "private-key", "password", "token", "api-key", "secret",
    "anthropic-api-key", "openai-api-key", "github-token", "google-api-key", "google-oauth-token",
    "google-oauth-secret", "huggingface-token", "npm-token", "stripe-key", "slack-token", "groq-api-key",
    "xai-api-key", "replicate-token", "digitalocean-token", "azure-key", "azure-client-secret", "bearer-token",
    "authorization", "url-token",
}))


# ---------------------------------------------------------------- a store built before (ragmem redact)

#: Messages rewritten per call of :meth:`~ragmem._store.store.Store.rewrite` (one log transaction each).
REWRITE_BATCH = 500


def _pass_counts(before: Message, after: Message) -> Counter[str]:
    """What redacting ``before`` took out (``after``'s counts less those an earlier redaction recorded)."""
    return Counter(redacted_counts(after)) - Counter(redacted_counts(before))


def redact_store(store: Any, namespace: str, *, dry_run: bool = False,
                 progress: Callable[[int], None] | None = None,
                 records: Callable[[Counter[str], bool], int] | None = None) -> dict[str, Any]:
    """Redact what a store holds of a namespace, as if it had been redacted on the way in (``ragmem redact``).

    Each session's messages are read from the log and redacted as :meth:`ragmem.Memory.add_many` would;
    those that change are rewritten through the store's own operation,
    :meth:`~ragmem._store.store.Store.rewrite` (ids, sessions, order and tool pairs unchanged; the log,
    lexical rows and vectors made anew from the new text), in batches of :data:`REWRITE_BATCH`, so the store
    stays in use meanwhile: readers see a message before or after, never half. The sessions' pinned states
    and running summaries too, and what ``records`` redacts (called with the counts to add to and ``dry_run``;
    the CLI passes :func:`ragmem._importing.redact_records`, the session metadata import records keep); then
    the log is compacted
    (:meth:`~ragmem._store.log_base.LogBase.compact`) so that no old text lingers in its files. ``dry_run`` only
    counts. ``progress`` is told the messages read so far, session by session. Returns
    ``{"messages": read, "changed": n, "reindexed": n, "redacted": {kind: n}, "states": n, "summaries": n}``.
    """
    counts: Counter[str] = Counter()
    out: dict[str, Any] = {"messages": 0, "changed": 0, "reindexed": 0, "states": 0, "summaries": 0,
                           "import_records": 0}
    log = store.log
    infos = store.sessions(namespace)
    sizes = {info.session: info.messages for info in infos}
    stated = [name for name in log.state.sessions(namespace) if name not in sizes]  # a state, no message yet
    for session in [info.session for info in infos] + sorted(stated):
        changed = []
        for m in log.messages(namespace, session) if session in sizes else ():
            r = redact_message(m)
            if r is not m:
                changed.append(r)
                counts.update(_pass_counts(m, r))
        out["messages"] += sizes.get(session, 0)
        out["changed"] += len(changed)
        if not dry_run:
            for start in range(0, len(changed), REWRITE_BATCH):
                out["reindexed"] += store.rewrite(namespace, changed[start:start + REWRITE_BATCH])
        state = log.state.get(namespace, session)
        mine: Counter[str] = Counter()
        clean = redact_value(state, mine) if state else state
        if mine:
            counts.update(mine)
            out["states"] += 1
            if not dry_run:
                log.state.set(namespace, session, clean)
        summary = log.state.summary(namespace, session)
        if summary is not None:
            text, n = redact_text(summary[0])
            if n:
                counts.update(n)
                out["summaries"] += 1
                if not dry_run:
                    log.state.set_summary(namespace, session, text, summary[1], summary[2])
        if progress is not None:
            progress(sizes.get(session, 0))
    out["import_records"] = records(counts, dry_run) if records is not None else 0
    if counts and not dry_run:
        log.compact()  # the old text must not linger in the file's free pages and the lexical index's segments
    out["redacted"] = dict(sorted(counts.items()))
    return out
