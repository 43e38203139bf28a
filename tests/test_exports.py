"""ChatGPT and Claude data exports: one session per conversation, idempotent."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from ragmem import Memory
from ragmem._cli import cli
from ragmem._errors import InvalidMessage
from ragmem._importing import import_export
from ragmem.importers import Parsed, chatgpt, claude_ai, detect


def detect_export(data):
    return detect("conversations.json", json.dumps(data))


def from_chatgpt(data):
    return {s.name: s.messages for s in chatgpt.sessions(data, Parsed("chatgpt", []))}


def from_claude(data):
    return {s.name: s.messages for s in claude_ai.sessions(data, Parsed("claude", []))}


def _node(ident, parent, children, role=None, text=None, t=None, kind="text", hidden=False):
    msg = None
    if role:
        msg = {"id": ident, "author": {"role": role, "name": None, "metadata": {}}, "create_time": t,
               "content": {"content_type": kind, "parts": [text]} if kind != "code" else {"content_type": "code", "language": "python", "text": text},
               "status": "finished_successfully", "metadata": {"is_visually_hidden_from_conversation": True} if hidden else {"model_slug": "gpt-4o"}}
    return {"id": ident, "message": msg, "parent": parent, "children": children}


CHATGPT = [{
    "title": "Sourdough starter help", "create_time": 1700000000.0, "update_time": 1700000500.0,
    "conversation_id": "6772a3f0-aaaa-bbbb-cccc-000000000001", "current_node": "a2",
    "mapping": {
        "root": _node("root", None, ["sys"]),
        "sys": _node("sys", "root", ["u1"], "system", "", 1700000000.0, hidden=True),
        "u1": _node("u1", "sys", ["a1", "a1b"], "user", "My sourdough starter smells like acetone.", 1700000001.0),
        "a1b": _node("a1b", "u1", [], "assistant", "An abandoned regenerated answer.", 1700000002.0),
        "a1": _node("a1", "u1", ["u2"], "assistant", "It is hungry: feed it twice a day at 1:1:1.", 1700000003.0),
        "u2": _node("u2", "a1", ["t1"], "user", "What flour should I use?", 1700000004.0),
        "t1": _node("t1", "u2", ["a2"], "tool", "browsing output", 1700000005.0),
        "a2": _node("a2", "t1", [], "assistant", "Whole rye flour gets it going fastest.", 1700000006.0),
    },
}]

CLAUDE = [{
    "uuid": "0b7c2c1e-1111-2222-3333-444444444444", "name": "Kubernetes ingress timeouts",
    "created_at": "2024-05-01T10:00:00.000000Z", "updated_at": "2024-05-01T10:05:00.000000Z",
    "chat_messages": [
        {"uuid": "m1", "text": "Our ingress drops requests after 60 seconds.", "sender": "human",
         "created_at": "2024-05-01T10:00:00.000000Z", "content": [{"type": "text", "text": "Our ingress drops requests after 60 seconds."}],
         "attachments": [], "files": []},
        {"uuid": "m2", "text": "", "sender": "assistant", "created_at": "2024-05-01T10:00:05.000000Z",
         "content": [{"type": "text", "text": "Raise proxy-read-timeout on the ingress annotation."}], "attachments": [], "files": []},
    ],
}]


def test_chatgpt_branch_the_user_saw_oldest_first():
    assert detect_export(CHATGPT) == "chatgpt"
    (name, rows), = from_chatgpt(CHATGPT).items()
    assert name == "chatgpt-sourdough-starter-help-6772a3f0-aaaa-bbbb-cccc-000000000001"
    assert [r["content"] for r in rows] == [
        "My sourdough starter smells like acetone.", "It is hungry: feed it twice a day at 1:1:1.",
        "What flour should I use?", "Whole rye flour gets it going fastest.",
    ]
    assert rows[0]["id"] == "chatgpt:u1" and rows[1]["metadata"]["model"] == "gpt-4o"


def test_claude_conversation():
    assert detect_export(CLAUDE) == "claude"
    (name, rows), = from_claude(CLAUDE).items()
    assert name == "claude-kubernetes-ingress-timeouts-0b7c2c1e-1111-2222-3333-444444444444"
    assert [r["role"] for r in rows] == ["user", "assistant"]
    assert rows[1]["content"] == "Raise proxy-read-timeout on the ingress annotation."


def test_import_is_one_session_per_conversation_and_idempotent(tmp_path, embedder):
    mem = Memory(tmp_path / "s", embedder=embedder)
    assert import_export(mem, CHATGPT) == {"chatgpt-sourdough-starter-help-6772a3f0-aaaa-bbbb-cccc-000000000001": 4}
    assert import_export(mem, CLAUDE) == {"claude-kubernetes-ingress-timeouts-0b7c2c1e-1111-2222-3333-444444444444": 2}
    assert import_export(mem, CHATGPT) == {"chatgpt-sourdough-starter-help-6772a3f0-aaaa-bbbb-cccc-000000000001": 0}
    hits = mem.search("which flour for the starter", k=1, scope="namespace")
    assert hits[0].session.startswith("chatgpt-") and "rye" in hits[0].message.text
    assert hits[0].message.created_at.year == 2023
    with pytest.raises(InvalidMessage, match="not a ChatGPT or Claude export"):
        import_export(mem, [{"role": "user", "content": "hi"}])
    mem.close()


@pytest.mark.model  # the CLI loads the bundled model
def test_cli_import_chats(tmp_path):
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(CLAUDE))
    store = str(tmp_path / "cli")
    result = CliRunner().invoke(cli, ["--store", store, "--json", "import-chats", str(path)])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)  # stdout: a first run's model export note goes to stderr
    assert (out["imported"], out["sessions"]) == (2, {"claude-kubernetes-ingress-timeouts-0b7c2c1e-1111-2222-3333-444444444444": 2})
    again = CliRunner().invoke(cli, ["--store", store, "import-chats", str(path)])
    assert "imported 0 messages into 0 sessions" in again.stdout  # nothing new: no session took any


# ----------------------------------------------------------------- issue 24: nothing dropped, nothing half done
def _chatgpt(conv_id, title, turns, t0=1700000000.0):
    """A ChatGPT conversation of ``turns`` (user, assistant, ...) with message ids ``<conv_id>-<n>``."""
    ids = [f"{conv_id}-{i}" for i in range(len(turns))]
    mapping = {"root": _node("root", None, ids[:1])}
    for i, text in enumerate(turns):
        mapping[ids[i]] = _node(ids[i], ids[i - 1] if i else "root", ids[i + 1:i + 2],
                                "user" if i % 2 == 0 else "assistant", text, t0 + i)
    return {"title": title, "create_time": t0, "conversation_id": conv_id, "current_node": ids[-1], "mapping": mapping}


def test_two_conversations_with_one_title_and_id_prefix_keep_two_sessions(tmp_path, hash_embedder):
    """Sessions were named by the title and the id's first 8 characters: the second overwrote the first, exit 0."""
    mem = Memory(tmp_path / "s", embedder=hash_embedder)
    data = [_chatgpt("6772a3f0-0000-0000-0000-00000000000a", "Same", ["first one", "reply a"]),
            _chatgpt("6772a3f0-0000-0000-0000-00000000000b", "Same", ["second one", "reply b"])]
    counts = import_export(mem, data)
    assert list(counts.values()) == [2, 2] and len(counts) == 2
    assert sorted(m.content for s in counts for m in mem.messages(s)) == ["first one", "reply a", "reply b",
                                                                         "second one"]
    mem.close()


def test_a_renamed_conversation_keeps_its_session_on_a_later_export(tmp_path, hash_embedder):
    """Re-importing after a rename failed ("message id ... is already used in session ..."), exit 1, and the
    conversations after it were never imported."""
    mem = Memory(tmp_path / "s", embedder=hash_embedder)
    first = import_export(mem, [_chatgpt("c-1", "Old title", ["hello", "hi"]), _chatgpt("c-2", "Other", ["x", "y"])])
    later = [_chatgpt("c-1", "New title", ["hello", "hi", "one more", "sure"]),
             _chatgpt("c-2", "Other", ["x", "y", "z"]), _chatgpt("c-3", "Third", ["new chat"])]
    again = import_export(mem, later)
    old_name = next(iter(first))
    assert again == {old_name: 2, "chatgpt-other-c-2": 1, "chatgpt-third-c-3": 1}
    assert [m.content for m in mem.messages(old_name)] == ["hello", "hi", "one more", "sure"]
    assert import_export(mem, later) == dict.fromkeys(again, 0)  # and once more stores nothing
    mem.close()


@pytest.mark.parametrize("broken, says", [
    (lambda c: c.__setitem__("create_time", 1e20) or [n["message"].__setitem__("create_time", None)
                                                       for n in c["mapping"].values() if n["message"]],
     "created_at 1e[+]20 is out of range"),
    (lambda c: [n["message"].__setitem__("create_time", float("nan")) for n in c["mapping"].values() if n["message"]],
     "created_at"),
    (lambda c: [n["message"].__setitem__("create_time", "yesterday") for n in c["mapping"].values() if n["message"]],
     "create_time 'yesterday' is not epoch seconds"),
    (lambda c: [n["message"].__setitem__("author", "user") for n in c["mapping"].values() if n["message"]],
     "author must be an object"),
    (lambda c: [n["message"].__setitem__("content", ["text"]) for n in c["mapping"].values() if n["message"]],
     "content must be an object"),
], ids=["create_time 1e20", "create_time NaN", "create_time yesterday", "author a string", "content a list"])
def test_a_malformed_conversation_stores_nothing_of_the_file_and_names_both(tmp_path, hash_embedder, broken, says):
    """One bad conversation left the earlier ones stored and the later ones not, and the error named neither
    the file nor the conversation (or a traceback, exit 3)."""
    bad = _chatgpt("bad-conv", "Broken one", ["oops", "hm"])
    broken(bad)
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps([_chatgpt("good-1", "Fine", ["a", "b"]), bad, _chatgpt("good-2", "Fine", ["c"])]))
    store = str(tmp_path / "cli")
    result = CliRunner().invoke(cli, ["--store", store, "import-chats", str(path)])
    text = str(result.exception)  # the CLI's entry point prints it as one line (tests/test_cli.py)
    assert isinstance(result.exception, InvalidMessage), result.output
    assert text.startswith(f"{path}: ") and "conversation 1 (id 'bad-conv'" in text, text
    assert re.search(says, text) and "nothing of the file was imported" in text.lower(), text
    after = Memory(store, embedder=hash_embedder)
    assert after.store.log.count() == 0  # not even the good conversation before it
    after.close()


def test_a_storing_failure_midway_says_which_conversations_were_stored(tmp_path):
    """Item 9's other half: a failure while storing (here the embedder going down on the second
    conversation, after the log took it) names the file and the conversation, and says exactly which
    conversations are stored; it said the second "was not imported" (it was stored, and its ids were
    lost), so a caller re-importing to recover it would find it already there, and nothing said so."""
    from ragmem._errors import StoredNotIndexed
    from ragmem.testing import HashEmbedder

    class GoesDown(HashEmbedder):
        calls = 0

        def embed_batch(self, texts, kind="document"):
            if kind == "document":
                GoesDown.calls += 1
                if GoesDown.calls >= 2:
                    raise ConnectionError("embedding service down")
            return super().embed_batch(texts, kind)

    mem = Memory(tmp_path / "s", embedder=GoesDown())
    convs = [_chatgpt("c-1", "One", ["a", "b"]), _chatgpt("c-2", "Two", ["c", "d"]), _chatgpt("c-3", "Three", ["e"])]
    with pytest.raises(StoredNotIndexed) as info:
        import_export(mem, convs, source="x.json")
    text = str(info.value)
    assert text.startswith("x.json: conversation 1 (id 'c-2'"), text
    assert "is stored, but indexing it failed" in text and "embedding service down" in text, text
    assert "Stored: 'chatgpt-one-c-1', 'chatgpt-two-c-2'" in text and "not stored: the 1 after it" in text, text
    assert set(info.value.ids) == {m.id for m in mem.store.log.messages("default", "chatgpt-two-c-2")}
    assert [s.session for s in mem.sessions()] == ["chatgpt-one-c-1", "chatgpt-two-c-2"]
    GoesDown.calls = -100  # the service is back: importing again stores only what is missing
    assert import_export(mem, convs, source="x.json") == {"chatgpt-one-c-1": 0, "chatgpt-two-c-2": 0,
                                                          "chatgpt-three-c-3": 1}
    mem.close()


def test_a_bad_claude_time_and_a_non_object_conversation_are_named(tmp_path, hash_embedder):
    mem = Memory(tmp_path / "s", embedder=hash_embedder)
    bad = json.loads(json.dumps(CLAUDE))
    bad[0]["chat_messages"][0]["created_at"] = "not a time"
    with pytest.raises(InvalidMessage, match=r"x\.json: conversation 0 \(id '0b7c2c1e.*message 0.*not a time"):
        import_export(mem, bad, source="x.json")
    with pytest.raises(InvalidMessage, match=r"x\.json: Claude conversation 1: it is not a JSON object \(got str\)"):
        import_export(mem, [*CLAUDE, "oops"], source="x.json")
    assert mem.store.log.count() == 0
    mem.close()


@pytest.mark.model  # the CLI stores with the real model
def test_a_zip_export_is_read_and_a_giant_message_names_the_cli_option(tmp_path):
    """A .zip got "not UTF-8 text"; a message over 1 MB advised Memory(max_chars=...), which the CLI cannot set."""
    import zipfile

    archive = tmp_path / "export.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("export/conversations.json", json.dumps(CLAUDE))
    store = str(tmp_path / "cli")
    result = CliRunner().invoke(cli, ["--store", store, "--json", "import-chats", str(archive)])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["imported"] == 2
    giant = tmp_path / "giant.json"
    giant.write_text(json.dumps([_chatgpt("g-1", "Giant", ["x" * 1_100_000])]))
    result = CliRunner().invoke(cli, ["--store", store, "import-chats", str(giant)])
    assert isinstance(result.exception, InvalidMessage) and "--max-chars" in str(result.exception), result.output
    result = CliRunner().invoke(cli, ["--store", store, "import-chats", str(giant), "--max-chars", "2000000"])
    assert result.exit_code == 0, result.output
    # ragmem ingest of a zip says to unzip it
    result = CliRunner().invoke(cli, ["--store", store, "ingest", str(archive)])
    assert isinstance(result.exception, InvalidMessage) and "unzip it" in str(result.exception), result.output
