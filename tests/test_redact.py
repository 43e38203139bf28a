"""No secret kept (invariant 13): keys, tokens, passwords and private keys become ``[redacted: KIND]`` before the log,
the lexical index or the vectors see them, on every door; placeholders and near-misses stay verbatim.

Every secret here is built at run time from random pieces (:func:`rnd`), so this file holds none that a scanner
would flag. The table :data:`SECRETS` holds each kind in the contexts transcripts show it in (an ``.env`` read
whole, JSON, a shell command, a URL, a log line); :data:`NEAR_MISSES` what must not change.
"""

from __future__ import annotations

import base64
import json
import os
import random
import string
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Callable

import pytest
from hypothesis import given, settings, strategies as st

from ragmem import Memory
from ragmem import _redact as redact
from ragmem._messages import ToolCall, parse_message
from ragmem._redact import redact_message, redact_text, redact_value

_RNG = random.Random(46)
ALNUM = string.ascii_letters + string.digits
UPPER = string.ascii_uppercase + string.digits
HEX = "0123456789abcdef"


def rnd(n: int, alphabet: str = ALNUM) -> str:
    """``n`` random characters (a fixed seed: the table is the same on every run)."""
    return "".join(_RNG.choice(alphabet) for _ in range(n))


def b64url(data: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")


def pem(label: str, lines: int = 12) -> str:
    body = "\n".join(rnd(64, ALNUM + "+/") for _ in range(lines))
    return f"-----BEGIN {label}-----\n{body}\n{rnd(20, ALNUM)}==\n-----END {label}-----"


# the secrets, each once, built from pieces
AWS_ID = "AK" + "IA" + rnd(16, UPPER)
AWS_SECRET = rnd(30, ALNUM + "/+") + "9" + rnd(9, ALNUM)
OPENAI = "sk-" + "proj-" + rnd(74, ALNUM + "-_") + "T3Blbk" + "FJ" + rnd(74, ALNUM + "-_")
OPENAI_OLD = "sk-" + rnd(20) + "T3Blbk" + "FJ" + rnd(20)
ANTHROPIC = "sk-" + "ant-api03-" + rnd(93, ALNUM + "-_") + "AA"
STRIPE = "sk_" + "live_" + rnd(99)
SLACK = "xox" + "b-" + rnd(12, string.digits) + "-" + rnd(13, string.digits) + "-" + rnd(24, string.ascii_lowercase + string.digits)
GITHUB = "gh" + "p_" + rnd(36)
GITHUB_PAT = "github" + "_pat_" + rnd(22) + "_" + rnd(59)
GITLAB = "gl" + "pat-" + rnd(20, ALNUM + "-_")
TELEGRAM = rnd(10, string.digits) + ":" + "AA" + rnd(33, ALNUM + "-_")
JWT = (b64url({"alg": "HS256", "typ": "JWT"}) + "." + b64url({"sub": rnd(10), "name": "dev", "iat": 1700000000})
       + "." + rnd(43, ALNUM + "-_"))
GOOGLE = "AI" + "za" + rnd(35, ALNUM + "-_")
AZURE_KEY = rnd(86, ALNUM + "+/") + "=="
AZURE_SECRET = rnd(3) + "8Q" + "~" + rnd(34, ALNUM + "_~.-")
HF = "hf" + "_" + rnd(34)
SENDGRID = "SG" + "." + rnd(22, ALNUM + "-_") + "." + rnd(43, ALNUM + "-_")
NPM = "npm" + "_" + rnd(36)
BEARER = rnd(24) + "9" + rnd(15)
URL_PASSWORD = rnd(14) + "7x"
PASSWORD = "Tr0ub4dor" + rnd(6)
RSA = pem("RSA " + "PRIVATE KEY")
OPENSSH = pem("OPENSSH " + "PRIVATE KEY")
GCP_KEY = pem("PRIVATE " + "KEY")
LOG_TOKEN = rnd(32, HEX)
QUERY_TOKEN = rnd(40)

#: (kind, a line as a transcript shows it, the secret in it): every kind, in the contexts it shows up in.
SECRETS: list[tuple[str, str, str]] = [
    ("aws-access-key-id", f"AWS_ACCESS_KEY_ID={AWS_ID}", AWS_ID),
    ("aws-access-key-id", f'{{"AccessKeyId": "{AWS_ID}", "Expiration": "2025-01-01T00:00:00Z"}}', AWS_ID),
    ("aws-secret-access-key", f"AWS_SECRET_ACCESS_KEY={AWS_SECRET}", AWS_SECRET),
    ("aws-secret-access-key", f'aws_secret_access_key = "{AWS_SECRET}"', AWS_SECRET),
    ("openai-api-key", f"OPENAI_API_KEY={OPENAI}", OPENAI),
    ("openai-api-key", f"export OPENAI_API_KEY='{OPENAI}'", OPENAI),
    ("openai-api-key", f'client = OpenAI(api_key="{OPENAI_OLD}")', OPENAI_OLD),
    ("anthropic-api-key", f'curl https://api.anthropic.com/v1/messages -H "x-api-key: {ANTHROPIC}"', ANTHROPIC),
    ("anthropic-api-key", f'{{"env": {{"ANTHROPIC_API_KEY": "{ANTHROPIC}"}}}}', ANTHROPIC),
    ("stripe-key", f"STRIPE_SECRET_KEY={STRIPE}", STRIPE),
    ("slack-token", f"SLACK_BOT_TOKEN={SLACK}", SLACK),
    ("github-token", f"origin\thttps://{GITHUB}@github.com/acme/payments.git (fetch)", GITHUB),
    ("github-token", f"git clone https://x-access-token:{GITHUB}@github.com/acme/payments.git", GITHUB),
    ("github-token", f"export GH_TOKEN={GITHUB_PAT}", GITHUB_PAT),
    ("gitlab-token", f"origin  https://oauth2:{GITLAB}@gitlab.com/acme/api.git (push)", GITLAB),
    ("telegram-bot-token", f"TELEGRAM_BOT_TOKEN={TELEGRAM}", TELEGRAM),
    ("telegram-bot-token", f"curl https://api.telegram.org/bot{TELEGRAM}/getMe", TELEGRAM),
    ("jwt", f"2025-10-19 14:02:07 DEBUG session cookie={JWT}; Path=/", JWT),
    ("google-api-key", f"https://maps.googleapis.com/maps/api/geocode/json?address=Paris&key={GOOGLE}", GOOGLE),
    ("google-api-key", f"GEMINI_API_KEY={GOOGLE}", GOOGLE),
    ("azure-key", "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey=" + AZURE_KEY
     + ";EndpointSuffix=core.windows.net", AZURE_KEY),
    ("azure-client-secret", f"AZURE_CLIENT_SECRET={AZURE_SECRET}", AZURE_SECRET),
    ("huggingface-token", f"huggingface-cli login --token {HF}", HF),
    ("sendgrid-api-key", f"SENDGRID_API_KEY={SENDGRID}", SENDGRID),
    ("npm-token", f"//registry.npmjs.org/:_authToken={NPM}", NPM),
    ("bearer-token", f'curl -s https://api.acme.dev/v2/orders -H "Authorization: Bearer {BEARER}"', BEARER),
    ("bearer-token", f'{{"headers": {{"Authorization": "Bearer {BEARER}"}}}}', BEARER),
    ("url-password", f"DATABASE_URL=postgres://app:{URL_PASSWORD}@db.internal:5432/app", URL_PASSWORD),
    ("url-password", f"redis://default:{URL_PASSWORD}@cache.internal:6379/0", URL_PASSWORD),
    ("password", f"DB_PASSWORD={PASSWORD}", PASSWORD),
    ("password", f"PASSWORD: {PASSWORD}", PASSWORD),
    ("password", f"  password: {PASSWORD}", PASSWORD),
    ("password", f'password = "{PASSWORD}"', PASSWORD),
    ("password", f'{{"username": "admin", "password": "{PASSWORD}"}}', PASSWORD),
    ("password", f"mysql -h db --password={PASSWORD} app", PASSWORD),
    ("token", f"2025-10-19T14:02:07Z INFO refreshing with token={LOG_TOKEN} ok", LOG_TOKEN),
    ("url-token", f"GET https://files.acme.dev/export.csv?access_token={QUERY_TOKEN}&dl=1 200", QUERY_TOKEN),
    ("private-key", RSA, RSA),
    ("private-key", f"$ cat ~/.ssh/id_ed25519\n{OPENSSH}\n$ ", OPENSSH),
    ("private-key", json.dumps({"type": "service_account", "project_id": "acme-prod", "private_key": GCP_KEY + "\n",
                                "client_email": "ci@acme-prod.iam.gserviceaccount.com"}), GCP_KEY.split("\n")[1]),
]

#: What must stay verbatim: placeholders, and strings shaped like secrets that are not.
COMMIT = rnd(40, HEX)
NEAR_MISSES: list[str] = [
    f"commit {COMMIT}\nAuthor: Dev <dev@acme.dev>",
    f"git checkout {COMMIT[:7]} && git log --oneline -1",
    f"request id {rnd(8, HEX)}-{rnd(4, HEX)}-4{rnd(3, HEX)}-a{rnd(3, HEX)}-{rnd(12, HEX)} took 32 ms",
    "![chart](data:image/png;base64," + base64.b64encode(bytes(_RNG.randrange(256) for _ in range(600))).decode() + ")",
    '"integrity": "sha512-' + base64.b64encode(bytes(_RNG.randrange(256) for _ in range(64))).decode() + '",',
    '"resolved": "https://registry.npmjs.org/left-pad/-/left-pad-1.3.0.tgz", "integrity": "sha1-'
    + base64.b64encode(bytes(_RNG.randrange(256) for _ in range(20))).decode() + '"',
    f"sha256:{rnd(64, HEX)}  app.tar.gz",
    f"{rnd(64, HEX)}  ragmem-0.1.0.tar.gz",
    "DATABASE_URL=postgres://user:password@localhost:5432/mydb",
    "DB_PASSWORD=changeme",
    "API_KEY=xxx",
    "API_KEY=xxxxxxxxxxxxxxxxxxxxxxxx",
    "OPENAI_API_KEY=<your-key>",
    "OPENAI_API_KEY=sk-...",
    "ANTHROPIC_API_KEY=sk-ant-...",
    "GITHUB_TOKEN=${GITHUB_TOKEN}",
    'curl -H "Authorization: Bearer $TOKEN" https://api.acme.dev',
    "Authorization: Bearer <token>",
    "STRIPE_SECRET_KEY=your_stripe_secret_key_here",
    "AWS_ACCESS_KEY_ID=" + "AKIAIOSFODNN7" + "EXAMPLE",
    'api_key = os.environ["OPENAI_API_KEY"]',
    'password = request.form["password"]',
    "password = form.password.data",
    "    password: str",
    "def login(username: str, password: str) -> Token:",
    "max_tokens: 4096",
    '{"input_tokens": 1532, "output_tokens": 211, "cache_read_input_tokens": 0}',
    "PWD=/home/dev/work/payments-api",
    "token_count = 42",
    "The token expired yesterday, so the login failed with 401.",
    "PASSWORD_RESET_TIMEOUT=3600",
    'secret_name: "prod/db/password"',
    "Use a password manager and rotate the API key every 90 days.",
    '"claudeCodeFirstTokenDate": "2025-07-28T18:53:10.456342Z"',
]


# ---------------------------------------------------------------- the detector, without a model


@pytest.mark.parametrize("kind,line,secret", SECRETS, ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(SECRETS)])
def test_each_secret_becomes_a_marker_naming_its_kind(kind, line, secret):
    out, counts = redact_text(line)
    assert secret not in out, out
    assert f"[redacted: {kind}]" in out and counts[kind] >= 1, (out, counts)
    assert set(counts) <= set(redact.KINDS)
    assert redact_text(out) == (out, Counter()), "redacting twice changes nothing more"


@pytest.mark.parametrize("line", NEAR_MISSES)
def test_placeholders_and_near_misses_stay_verbatim(line):
    assert redact_text(line) == (line, Counter())


def test_an_env_file_read_whole_keeps_its_names_and_loses_its_values():
    env = "\n".join(line for kind, line, _ in SECRETS if "=" in line and "\n" not in line and line[:1].isupper())
    env += "\nDEBUG=true\nPORT=8080\nDATABASE_POOL=32\n"
    out, counts = redact_text(env)
    for _, _, secret in SECRETS:
        assert secret not in out
    assert "DEBUG=true\nPORT=8080\nDATABASE_POOL=32" in out
    assert out.count("\n") == env.count("\n") and sum(counts.values()) >= 10
    names = [line.split("=", 1)[0] for line in env.splitlines()]
    assert [line.split("=", 1)[0] for line in out.splitlines()] == names


def test_a_tool_calls_arguments_stay_valid_json():
    args = json.dumps({"command": f"export OPENAI_API_KEY={OPENAI} && python run.py", "timeout": 30,
                       "env": {"DB_PASSWORD": PASSWORD, "PORT": "8080"}, "cwd": "/srv/app"})
    m = parse_message({"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "Bash", "arguments": args}}]})
    out = redact_message(m)
    parsed = json.loads(out.tool_calls[0].arguments)
    assert parsed == {"command": "export OPENAI_API_KEY=[redacted: openai-api-key] && python run.py", "timeout": 30,
                      "env": {"DB_PASSWORD": "[redacted: password]", "PORT": "8080"}, "cwd": "/srv/app"}
    assert out.metadata["redacted"] == {"openai-api-key": 1, "password": 1}
    assert (out.id, out.role, out.tool_calls[0].id, out.tool_calls[0].name) == (m.id, "assistant", "c1", "Bash")
    clean = parse_message({"role": "assistant", "content": None, "tool_calls": [
        {"id": "c2", "type": "function", "function": {"name": "Read", "arguments": '{"path":  "a.py"}'}}]})
    assert redact_message(clean) is clean  # nothing to redact: the same object, its arguments' spacing kept


def test_content_parts_metadata_and_a_non_json_argument_are_redacted_too():
    image = "data:image/png;base64," + base64.b64encode(bytes(range(256)) * 4).decode()
    m = parse_message({"role": "user", "content": [{"type": "text", "text": f"my key {GITHUB}"},
                                                   {"type": "image_url", "image_url": {"url": image}}],
                       "metadata": {"remote": f"https://{GITHUB}@github.com/acme/app.git", "api_key": ANTHROPIC,
                                    "topic": "deploy"}})
    out = redact_message(m)
    assert GITHUB not in json.dumps(out.to_record()) and ANTHROPIC not in json.dumps(out.to_record())
    assert out.content[1] == m.content[1]  # the image stays whole
    assert out.metadata["topic"] == "deploy" and out.metadata["redacted"] == {"anthropic-api-key": 1, "github-token": 2}
    raw = redact_message(parse_message({"role": "assistant", "content": None, "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "apply_patch", "arguments": f"+TOKEN={SLACK}\n"}}]}))
    assert raw.tool_calls[0] == ToolCall("c", "apply_patch", "+TOKEN=[redacted: slack-token]\n")


def test_rules_that_look_in_lower_cased_text_name_lower_case_hints():
    for rule in redact._rules():
        if rule.lower:
            assert all(h == h.lower() for h in rule.hints), rule


@settings(max_examples=200, deadline=None)
@given(before=st.text(alphabet=string.ascii_letters + " .,:;()'\"\n\t-=/", max_size=40),
       after=st.text(alphabet=string.ascii_letters + " .,:;()'\"\n\t-=/", max_size=40),
       pick=st.sampled_from([AWS_ID, OPENAI, ANTHROPIC, STRIPE, SLACK, GITHUB, GITHUB_PAT, GITLAB, JWT, GOOGLE, HF,
                             SENDGRID, RSA]))
def test_a_shaped_secret_never_survives_whatever_surrounds_it(before, after, pick):
    out, counts = redact_text(f"{before} {pick} {after}")
    assert pick not in out and sum(counts.values()) >= 1


def test_redact_value_keeps_keys_and_every_non_secret_value():
    value = {"goal": "ship it", "n": 3, "db": f"postgres://app:{URL_PASSWORD}@db:5432/x", "flags": [True, None],
             "nested": {"client_secret": AZURE_SECRET, "token_count": 12}}
    counts: Counter[str] = Counter()
    out = redact_value(value, counts)
    assert out == {"goal": "ship it", "n": 3, "db": "postgres://app:[redacted: url-password]@db:5432/x",
                   "flags": [True, None], "nested": {"client_secret": "[redacted: azure-client-secret]",
                                                     "token_count": 12}}
    assert counts == Counter({"url-password": 1, "azure-client-secret": 1})


# ---------------------------------------------------------------- the store, with the real model and Chroma



def transcript(path: Path, session: str = "9d2f1c3e-0b7a-4e51-8a6c-3f4e5d6c7b8a") -> None:
    """A Claude Code session that reads an ``.env`` whole, lists git remotes, reads a private key, calls an API
    with a bearer token, and is asked about a commit, an image and a lockfile (the near-misses)."""
    base = {"isSidechain": False, "userType": "external", "cwd": "/home/dev/acme", "sessionId": session,
            "version": "2.0.24", "gitBranch": "main"}
    rows: list[dict] = []
    at = [0]

    def stamp() -> str:
        at[0] += 1
        return f"2025-10-19T14:{at[0] // 60:02d}:{at[0] % 60:02d}.000Z"

    def user(text: str) -> None:
        rows.append({**base, "parentUuid": None, "type": "user", "uuid": f"u{len(rows)}", "timestamp": stamp(),
                     "message": {"role": "user", "content": text}})

    def call(name: str, args: dict, result: str) -> None:
        tid = f"toolu_{len(rows):04d}"
        rows.append({**base, "parentUuid": None, "type": "assistant", "uuid": f"a{len(rows)}", "requestId": f"r{len(rows)}",
                     "timestamp": stamp(), "message": {"model": "claude-sonnet-4-5-20250929", "id": f"msg_{len(rows)}",
                                                       "type": "message", "role": "assistant",
                                                       "content": [{"type": "tool_use", "id": tid, "name": name,
                                                                    "input": args}]}})
        rows.append({**base, "parentUuid": None, "type": "user", "uuid": f"t{len(rows)}", "timestamp": stamp(),
                     "message": {"role": "user", "content": [{"tool_use_id": tid, "type": "tool_result",
                                                              "content": result}]}})

    user("Why does the deploy fail? Check the config and the remotes.")
    env = "\n".join(line for _, line, _ in SECRETS if "\n" not in line)
    call("Read", {"file_path": "/home/dev/acme/.env"}, env)
    call("Bash", {"command": "git remote -v"}, "\n".join(line for _, line, _ in SECRETS if "github.com" in line))
    call("Read", {"file_path": "/home/dev/.ssh/id_rsa"}, RSA)
    call("Bash", {"command": f'curl -H "Authorization: Bearer {BEARER}" https://api.acme.dev/v2/orders'},
         '{"orders": [], "status": 401}')
    call("Bash", {"command": "git log -3 && cat package-lock.json | head"}, "\n".join(NEAR_MISSES))
    user(f"Also my DB password is in here: DB_PASSWORD={PASSWORD}. The deploy key is {OPENSSH}")
    path.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in rows))


def secrets_on_disk(folder: Path, secrets: list[str]) -> list[tuple[str, str]]:
    """Every (secret, file) whose bytes hold the secret as written, or lower-cased (the lexical index's form)."""
    found = []
    for root, _, files in os.walk(folder):
        for f in files:
            if not (Path(root) / f).is_file():
                continue  # a socket (the hook worker's)
            data = (Path(root) / f).read_bytes()
            for s in secrets:
                for form in {s, s.lower()}:
                    probe = form.split("\n")[1] if form.startswith("-----BEGIN") else form
                    if probe.encode() in data:
                        found.append((s[:12], str(Path(root) / f)))
    return found


def _all_secrets() -> list[str]:
    return sorted({s for _, _, s in SECRETS} | {OPENSSH})


def _assert_nothing_kept(mem: Memory, folder: Path) -> None:
    exported = json.dumps([mem.export(s.session) for s in mem.sessions()], ensure_ascii=False)
    for s in _all_secrets():
        assert s not in exported, s[:12]
        hits = mem.search(s, k=10, scope="namespace")
        assert hits and not any(s in json.dumps(h.message.to_record()) for h in hits), s[:12]
    for near in NEAR_MISSES:
        assert near in exported or json.dumps(near)[1:-1] in exported, near[:40]
    ctx = mem.for_session(mem.sessions()[0].session).prompt(f"What is the value of DB_PASSWORD and the key {AWS_ID}?",
                                                            budget=6000)
    shown = json.dumps(ctx.messages) + repr(ctx.trace)
    assert not [s for s in _all_secrets() if s in shown and s not in {AWS_ID}]  # the question's own words aside
    assert "[redacted: password]" in json.dumps(ctx.messages)
    mem.store.flush()
    assert secrets_on_disk(folder, _all_secrets()) == []


@pytest.mark.model
def test_an_imported_transcript_keeps_no_secret_anywhere_and_counts_them(tmp_path):
    from ragmem._importing import import_paths

    transcript(tmp_path / "t.jsonl")
    store = tmp_path / "store"
    mem = Memory(store)
    try:
        report = import_paths(mem, [str(tmp_path / "t.jsonl")])
        counts = report.to_dict()["redacted"]
        assert counts["password"] >= 7 and counts["private-key"] >= 3 and counts["github-token"] >= 3, counts
        assert set(counts) >= {k for k, _, _ in SECRETS} - {"private-key"}
        assert mem.store.stats(mem.namespace, mem.session)["redact"] is True
        _assert_nothing_kept(mem, store)
    finally:
        mem.close()


@pytest.mark.model
def test_ragmem_redact_on_a_store_built_without_it_gives_the_same_store(tmp_path):
    """A store built with ``redact = false``, then ``ragmem redact``: the messages (ids, order, tool pairs, text,
    metadata) are those of a store that redacted on the way in, and nothing of the secrets is left on disk."""
    from ragmem._importing import import_paths

    transcript(tmp_path / "t.jsonl")
    on, off = tmp_path / "on", tmp_path / "off"
    off.mkdir(mode=0o700)
    (off / "ragmem.toml").write_text("redact = false\n")
    for folder in (on, off):
        mem = Memory(folder)
        try:
            import_paths(mem, [str(tmp_path / "t.jsonl")])
            mem.state.update(db=f"postgres://app:{URL_PASSWORD}@db:5432/x")
        finally:
            mem.close()
    before = secrets_on_disk(off, _all_secrets())
    assert before, "the store without redaction kept its secrets (else this test tests nothing)"
    sessions = subprocess.run([sys.executable, "-m", "ragmem", "--store", str(off), "--json", "sessions"],
                              capture_output=True, text=True, check=True)
    assert json.loads(sessions.stdout)
    done = subprocess.run([sys.executable, "-m", "ragmem", "--store", str(off), "--json", "redact"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["changed"] == 5 and out["states"] == 1 and out["redacted"]["password"] >= 7, out
    a, b = Memory(on), Memory(off)
    try:
        assert b.store.redact is False and b.store.stats(b.namespace, b.session)["redact"] is False
        names = [s.session for s in a.sessions()]
        assert names == [s.session for s in b.sessions()]
        for name in names:
            assert a.export(name) == b.export(name)  # ids, order, tool pairs, content, metadata
            assert a.for_session(name).state.get() == b.for_session(name).state.get()
        _assert_nothing_kept(b, off)
        again = subprocess.run([sys.executable, "-m", "ragmem", "--store", str(off), "--json", "redact"],
                               capture_output=True, text=True, timeout=600)
        assert json.loads(again.stdout)["changed"] == 0  # nothing more to redact
    finally:
        a.close()
        b.close()


@pytest.mark.model
def test_ragmem_redact_while_another_process_adds_loses_nothing(tmp_path):
    """``ragmem redact`` in one process while this one adds: every message acknowledged on either side is in the
    log and a vector hit, the secrets are gone, and ``ragmem check`` finds the index in agreement with the log."""
    store = tmp_path / "s"
    store.mkdir(mode=0o700)
    (store / "ragmem.toml").write_text("redact = false\n")
    before = []
    for i in range(120):
        line = SECRETS[i % len(SECRETS)][1] if i % 3 == 0 else f"note {i}: the pool holds {i} slots"
        before.append({"role": "user" if i % 2 == 0 else "assistant", "content": line, "id": f"old-{i}"})
    with Memory(store, session="old") as mem:
        mem.add_many(before)
    proc = subprocess.Popen([sys.executable, "-m", "ragmem", "--store", str(store), "--json", "redact", "--no-progress"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    added = []
    with Memory(store, session="live") as mem:
        while proc.poll() is None or len(added) < 5:
            added.append(mem.add({"role": "user", "content": f"live turn {len(added)}: the canary is {rnd(8)}"}))
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    assert json.loads(out)["changed"] == 40
    check = subprocess.run([sys.executable, "-m", "ragmem", "--store", str(store), "--json", "check"],
                           capture_output=True, text=True, timeout=600)
    assert check.returncode == 0, check.stdout + check.stderr
    with Memory(store, session="live") as mem:
        assert [m.id for m in mem.messages()] == [m.id for m in added]
        assert [m.id for m in mem.messages("old")] == [m["id"] for m in before]
        exported = json.dumps(mem.export("old"))
        assert not [s for _, _, s in SECRETS if s in exported]
        for m in added[:: max(1, len(added) // 5)]:
            assert m.id in [h.message.id for h in mem.search(m.content, k=3)]
    assert secrets_on_disk(store, _all_secrets()) == []


def test_redaction_is_the_stores_choice_and_the_caller_may_override_it(tmp_path, hash_embedder):
    line = f"AWS_ACCESS_KEY_ID={AWS_ID}"
    with Memory(tmp_path / "a", embedder=hash_embedder) as mem:
        stored = mem.add({"role": "user", "content": line})
        assert stored.content == "AWS_ACCESS_KEY_ID=[redacted: aws-access-key-id]"
        assert stored.metadata["redacted"] == {"aws-access-key-id": 1} and mem.get(stored.id) == stored
        plain = mem.add({"role": "user", "content": "nothing secret"})
        assert "redacted" not in plain.metadata
    (tmp_path / "b").mkdir(mode=0o700)
    (tmp_path / "b" / "ragmem.toml").write_text("redact = false\n")
    with Memory(tmp_path / "b", embedder=hash_embedder) as mem:
        assert mem.add({"role": "user", "content": line}).content == line and mem.store.redact is False
        mem.state.update(key=AWS_ID)
        assert mem.state.get() == {"key": AWS_ID}
    with Memory(tmp_path / "b", embedder=hash_embedder, redact=True) as mem:  # the caller's word wins
        assert AWS_ID not in mem.add({"role": "user", "content": line + " again"}).content
    with Memory(tmp_path / "c", embedder=hash_embedder, redact=False) as mem:
        assert mem.add({"role": "user", "content": line}).content == line


def test_a_message_stored_verbatim_before_can_be_added_again(tmp_path, hash_embedder):
    """A store that kept a secret before redaction was on takes the same message again as a re-add (a no-op),
    not as another message under the same id (``ragmem redact`` then rewrites the stored one)."""
    msg = {"role": "user", "content": f"GH_TOKEN={GITHUB}", "id": "m1"}
    with Memory(tmp_path / "s", embedder=hash_embedder, redact=False) as mem:
        mem.add(msg)
    with Memory(tmp_path / "s", embedder=hash_embedder) as mem:
        assert mem.add(msg).content == msg["content"] and len(mem.messages()) == 1


# ---------------------------------------------------------------- every door, one secret each

#: (door, secret kind, the secret, a message holding it). Each door stores through Memory.add_many.
DOORS: list[tuple[str, str, str]] = [
    ("Memory.add", "aws-access-key-id", AWS_ID),
    ("Memory.add_many (Anthropic blocks)", "openai-api-key", OPENAI),
    ("AsyncMemory.add", "anthropic-api-key", ANTHROPIC),
    ("ragmem ingest", "stripe-key", STRIPE),
    ("ragmem import", "slack-token", SLACK),
    ("ragmem import-chats", "github-token", GITHUB_PAT),
    ("ragmem import-chats --follow", "gitlab-token", GITLAB),
    ("ragmem hook claude-code", "telegram-bot-token", TELEGRAM),
    ("MCP add_messages", "google-api-key", GOOGLE),
    ("MCP update_pinned_state", "huggingface-token", HF),
    ("JSON API /api/add", "sendgrid-api-key", SENDGRID),
    ("JSON API /api/state", "azure-client-secret", AZURE_SECRET),
]


def _line(kind: str, secret: str) -> str:
    return next(line for k, line, s in SECRETS if k == kind and s == secret)


def _cc_file(path: Path, text: str, session: str) -> None:
    row = {"isSidechain": False, "userType": "external", "cwd": "/home/dev/acme", "sessionId": session,
           "version": "2.0.24", "gitBranch": "main", "parentUuid": None, "type": "user", "uuid": f"{session}-1",
           "timestamp": "2025-10-19T14:00:00.000Z", "message": {"role": "user", "content": text}}
    path.write_text(json.dumps(row) + "\n")


@pytest.fixture
def hook_workers_killed(tmp_path):
    """The hook's door starts the store's worker: killed when the test ends (as tests/test_hooks.py does)."""
    yield
    import contextlib

    import psutil
    from test_hooks import workers

    for p in workers(tmp_path):
        with contextlib.suppress(psutil.NoSuchProcess, psutil.TimeoutExpired):
            p.kill()
            p.wait(30)


@pytest.mark.model
@pytest.mark.server
def test_every_door_stores_a_secret_only_as_its_marker(tmp_path, embedder, hook_workers_killed):
    """The property over the doors' table: whatever the door, its secret reaches neither the log, the lexical
    index, the vectors nor the folder's bytes, and the door's own answers (MCP's, the JSON API's) never hold it."""
    import anyio
    import httpx
    from mcp import Client

    from benchmarks.serveproc import ServeProcess
    from ragmem import AsyncMemory, _mcp
    from ragmem._importing import follow
    from test_cli import run as cli
    from test_hooks import event, hook

    store = tmp_path / "store"
    done: dict[str, str] = {}

    def check(door: str, kind: str, secret: str, answers: str = "") -> None:
        assert secret not in answers, door
        done[door] = kind

    def add(door: str, kind: str, secret: str) -> None:
        with Memory(store, session="add", embedder=embedder) as mem:
            stored = mem.add({"role": "user", "content": _line(kind, secret)})
            check(door, kind, secret, json.dumps(stored.to_record()))
            assert stored.metadata["redacted"] == {kind: 1}

    def add_many(door: str, kind: str, secret: str) -> None:
        with Memory(store, session="anthropic", embedder=embedder) as mem:
            stored = mem.add_many([
                {"role": "user", "content": "run it"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "tu1", "name": "Bash",
                                                   "input": {"command": _line(kind, secret)}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu1", "content": "done"}]}])
            check(door, kind, secret, json.dumps([m.to_record() for m in stored]))

    def async_add(door: str, kind: str, secret: str) -> None:
        async def go() -> str:
            mem = AsyncMemory(store, session="async", embedder=embedder)
            try:
                return json.dumps((await mem.add({"role": "user", "content": _line(kind, secret)})).to_record())
            finally:
                await mem.close()
        check(door, kind, secret, anyio.run(go))

    def ingest(door: str, kind: str, secret: str) -> None:
        (tmp_path / "in.jsonl").write_text(json.dumps({"role": "user", "content": _line(kind, secret)}) + "\n")
        status, out, err = cli("--store", str(store), "--session", "ingest", "ingest", str(tmp_path / "in.jsonl"))
        assert status == 0, err
        check(door, kind, secret, out + err)

    def import_(door: str, kind: str, secret: str) -> None:
        rec = {"role": "user", "content": _line(kind, secret), "id": "imported-1", "seq": 0,
               "created_at": "2025-10-19T14:00:00+00:00", "metadata": {}}
        (tmp_path / "export.jsonl").write_text(json.dumps(rec) + "\n")
        status, out, err = cli("--store", str(store), "--session", "import", "import", str(tmp_path / "export.jsonl"))
        assert status == 0, err
        check(door, kind, secret, out + err)

    def import_chats(door: str, kind: str, secret: str) -> None:
        _cc_file(tmp_path / "chat.jsonl", _line(kind, secret), "5a1b2c3d-0000-4000-8000-000000000001")
        status, out, err = cli("--store", str(store), "--json", "import-chats", str(tmp_path / "chat.jsonl"))
        assert status == 0, err
        assert json.loads(out)["redacted"] == {kind: 1}
        check(door, kind, secret, out + err)

    def follow_(door: str, kind: str, secret: str) -> None:
        _cc_file(tmp_path / "live.jsonl", _line(kind, secret), "5a1b2c3d-0000-4000-8000-000000000002")
        with Memory(store, embedder=embedder) as mem:
            report = follow(mem, [str(tmp_path / "live.jsonl")], rounds=1, interval=0.05)
        assert report.to_dict()["redacted"] == {kind: 1}
        done[door] = kind

    def hook_(door: str, kind: str, secret: str) -> None:
        _cc_file(tmp_path / "hooked.jsonl", _line(kind, secret), "5a1b2c3d-0000-4000-8000-000000000003")
        answer = hook(store, "claude-code", event("UserPromptSubmit", tmp_path / "hooked.jsonl",
                                                   session="5a1b2c3d-0000-4000-8000-000000000003",
                                                   prompt="what was the bot token?"))
        assert answer.returncode == 0, answer.stderr
        check(door, kind, secret, answer.stdout + answer.stderr)

    server = _mcp.build_server(str(store), embedder=embedder)

    def mcp_add(door: str, kind: str, secret: str) -> None:
        async def go():
            async with Client(server) as client:
                added = await client.call_tool("add_messages", {"messages": [
                    {"role": "user", "content": _line(kind, secret)}], "session": "mcp"})
                found = await client.call_tool("search_memory", {"query": secret, "session": "mcp"})
                ctx = await client.call_tool("get_context", {"user_turn": "which key?", "session": "mcp"})
                return added, json.dumps([added.structured_content, found.structured_content, ctx.structured_content])

        added, answers = anyio.run(go)
        assert added.structured_content["redacted"] == {kind: 1}
        check(door, kind, secret, answers)

    def mcp_state(door: str, kind: str, secret: str) -> None:
        async def go():
            async with Client(server) as client:
                set_ = await client.call_tool("update_pinned_state", {"updates": {"hf": secret}, "session": "mcp"})
                got = await client.call_tool("get_pinned_state", {"session": "mcp"})
                return json.dumps([set_.structured_content, got.structured_content])

        check(door, kind, secret, anyio.run(go))

    srv = ServeProcess(store, "--rate", "0")
    key = srv.make_key("default")

    def api_add(door: str, kind: str, secret: str) -> None:
        with httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {key}"}, timeout=600) as http:
            added = http.post("/api/add", json={"message": {"role": "user", "content": _line(kind, secret)},
                                               "session": "api"})
            assert added.status_code == 200, added.text
            found = http.post("/api/search", json={"query": secret, "session": "api"})
            prompt = http.post("/api/prompt", json={"user_turn": "which key?", "session": "api"})
            check(door, kind, secret, added.text + found.text + prompt.text)

    def api_state(door: str, kind: str, secret: str) -> None:
        with httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {key}"}, timeout=600) as http:
            put = http.post("/api/state", json={"updates": {"azure": secret}, "session": "api"})
            assert put.status_code == 200, put.text
            check(door, kind, secret, put.text + http.get("/api/state", params={"session": "api"}).text)

    through: dict[str, Callable[[str, str, str], None]] = {
        "Memory.add": add, "Memory.add_many (Anthropic blocks)": add_many, "AsyncMemory.add": async_add,
        "ragmem ingest": ingest, "ragmem import": import_, "ragmem import-chats": import_chats,
        "ragmem import-chats --follow": follow_, "ragmem hook claude-code": hook_, "MCP add_messages": mcp_add,
        "MCP update_pinned_state": mcp_state, "JSON API /api/add": api_add, "JSON API /api/state": api_state,
    }
    try:
        for door, kind, secret in DOORS:
            if door.startswith("JSON API"):
                continue
            through[door](door, kind, secret)
    finally:
        server._ragmem_memories.close()  # type: ignore[attr-defined]
    with srv:
        for door, kind, secret in DOORS:
            if door.startswith("JSON API"):
                through[door](door, kind, secret)
    assert set(done) == set(through) == {d for d, _, _ in DOORS}
    # The hook's worker still runs and owns the index: the store is read back through it. (Late in the full
    # suite this read failed for 60 s in three runs of five: the test process then held over 1,024 files, and the
    # client waited for the owner's reply with select(), which refuses such a descriptor; it polls now.)
    with Memory(store, embedder=embedder) as mem:
        everything = json.dumps([mem.for_session(s.session).export() for s in mem.sessions()]
                                + [mem.for_session(s.session).state.get() for s in mem.sessions()])
        for door, kind, secret in DOORS:
            assert secret not in everything, door
            assert f"[redacted: {kind}]" in everything, door
            hits = mem.search(secret, k=5, scope="namespace")
            assert not any(secret in json.dumps(h.message.to_record()) for h in hits), door
        mem.store.flush()
    assert secrets_on_disk(store, [s for _, _, s in DOORS]) == []
