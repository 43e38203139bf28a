"""ChatGPT and Claude data exports: one session per conversation, idempotent."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from ragmem import Memory
from ragmem._cli import cli
from ragmem._errors import InvalidMessage
from ragmem._exports import detect_export, from_chatgpt, from_claude, import_export


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
    assert name == "chatgpt-sourdough-starter-help-6772a3f0"
    assert [r["content"] for r in rows] == [
        "My sourdough starter smells like acetone.", "It is hungry: feed it twice a day at 1:1:1.",
        "What flour should I use?", "Whole rye flour gets it going fastest.",
    ]
    assert rows[0]["id"] == "chatgpt:u1" and rows[1]["metadata"]["model"] == "gpt-4o"


def test_claude_conversation():
    assert detect_export(CLAUDE) == "claude"
    (name, rows), = from_claude(CLAUDE).items()
    assert name == "claude-kubernetes-ingress-timeouts-0b7c2c1e"
    assert [r["role"] for r in rows] == ["user", "assistant"]
    assert rows[1]["content"] == "Raise proxy-read-timeout on the ingress annotation."


def test_import_is_one_session_per_conversation_and_idempotent(tmp_path, embedder):
    mem = Memory(tmp_path / "s", embedder=embedder)
    assert import_export(mem, CHATGPT) == {"chatgpt-sourdough-starter-help-6772a3f0": 4}
    assert import_export(mem, CLAUDE) == {"claude-kubernetes-ingress-timeouts-0b7c2c1e": 2}
    assert import_export(mem, CHATGPT) == {"chatgpt-sourdough-starter-help-6772a3f0": 0}
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
    assert json.loads(result.output) == {"imported": 2, "sessions": {"claude-kubernetes-ingress-timeouts-0b7c2c1e": 2}}
    again = CliRunner().invoke(cli, ["--store", store, "import-chats", str(path)])
    assert "imported 0 messages into 1 sessions" in again.output
