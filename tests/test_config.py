"""The store's ragmem.toml and RAGMEM_* variables: every tool opens a store the same way."""

from __future__ import annotations

import json
import textwrap

import pytest
from click.testing import CliRunner

from ragmem import Memory
from ragmem._cli import cli
from ragmem._config import load_config, load_embedder
from ragmem._errors import EmbeddingMismatch, UsageError

EMBEDDER_MODULE = textwrap.dedent('''
    import hashlib
    import numpy as np

    class NumpyHashEmbedder:
        """Returns a numpy array, as many third-party embedders do."""

        name = "numpy-hash-embedder"

        def embed_batch(self, texts, kind="document"):
            out = np.zeros((len(texts), 32), dtype=np.float32)
            for i, t in enumerate(texts):
                for w in t.lower().split():
                    out[i, int(hashlib.md5(w.encode()).hexdigest(), 16) % 32] += 1.0
                out[i, 0] += 1e-3
            return out / np.linalg.norm(out, axis=1, keepdims=True)
''')


@pytest.fixture
def embedder_module(tmp_path, monkeypatch):
    (tmp_path / "my_embedders.py").write_text(EMBEDDER_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "my_embedders:NumpyHashEmbedder"


def test_an_embedder_returning_numpy_arrays_works(tmp_path, embedder_module):
    emb = load_embedder(embedder_module)
    mem = Memory(tmp_path / "np", embedder=emb)
    mem.add_many([{"role": "user", "content": "the staging database password rotates monthly"},
                  {"role": "user", "content": "lunch is at noon"}])
    hits = mem.search("database password", k=1)
    assert hits[0].message.text.startswith("the staging database")
    assert mem.prompt("database password?", budget=500).messages[-1]["content"] == "database password?"
    mem.close()


@pytest.mark.model  # the CLI loads the bundled model
def test_the_cli_opens_a_custom_embedder_store_through_its_config(tmp_path, embedder_module):
    store = tmp_path / "custom"
    mem = Memory(store, embedder=load_embedder(embedder_module), session="notes")
    mem.add({"role": "user", "content": "the dance studio opens on Fridays"})
    mem.close()
    with pytest.raises(EmbeddingMismatch):  # without the config, the default model does not match
        Memory(store, session="notes").search("dance studio")
    (store / "ragmem.toml").write_text(f'embedder = "{embedder_module}"\nsession = "notes"\n')
    result = CliRunner().invoke(cli, ["--store", str(store), "--json", "search", "dance studio"])
    assert result.exit_code == 1 and "--trust-store-config" in str(result.exception)  # an import path: opt in
    result = CliRunner().invoke(cli, ["--store", str(store), "--trust-store-config", "--json", "search", "dance studio"])
    assert result.exit_code == 0, result.output
    assert "dance studio" in json.loads(result.output)[0]["message"]["content"]


def test_environment_overrides_the_file(tmp_path, monkeypatch):
    (tmp_path / "ragmem.toml").write_text('namespace = "team-a"\nchroma_url = "http://127.0.0.1:1"\n')
    assert load_config(tmp_path).namespace == "team-a"
    monkeypatch.setenv("RAGMEM_NAMESPACE", "team-b")
    monkeypatch.setenv("RAGMEM_EMBEDDER", "default")
    cfg = load_config(tmp_path, trust=True)
    assert (cfg.namespace, cfg.chroma_url, cfg.embedder) == ("team-b", "http://127.0.0.1:1", "default")
    assert cfg.make_embedder() is None  # "default": the store's own model (the one its records name)
    monkeypatch.setenv("RAGMEM_EMBEDDER", "all-MiniLM-L6-v2")
    assert load_config(tmp_path).make_embedder().name == "all-MiniLM-L6-v2"


@pytest.mark.parametrize("text, match", [
    ('colour = "blue"\n', "unknown keys"),
    ("chroma_url = 3\n", "non-empty string"),
    ("chroma_url = \n", "not valid TOML"),
])
def test_a_bad_config_says_what_is_wrong(tmp_path, text, match):
    (tmp_path / "ragmem.toml").write_text(text)
    with pytest.raises(UsageError, match=match):
        load_config(tmp_path)


def test_a_bad_embedder_path_says_what_is_wrong():
    with pytest.raises(UsageError, match="import path"):
        load_embedder("no_colon_here")
    with pytest.raises(UsageError, match="cannot be imported"):
        load_embedder("no_such_module_xyz:Thing")


@pytest.mark.server
def test_the_config_points_every_tool_at_a_chroma_server(tmp_path, chroma_server):
    store = tmp_path / "served"
    store.mkdir()
    (store / "ragmem.toml").write_text(f'chroma_url = "{chroma_server.url}"\n')
    mem = Memory(store, trust_config=True)  # a server named by the folder's file: the caller opts in
    assert mem.store.chroma_url == chroma_server.url
    mem.add({"role": "user", "content": "the backup job runs at 02:00"})
    mem.close()
    assert not (store / "chroma").exists()  # the index went to the server, not an embedded folder
    result = CliRunner().invoke(cli, ["--store", str(store), "--trust-store-config", "--json", "search", "backup job"])
    assert result.exit_code == 0 and "02:00" in result.output


def test_cli_prompt_defaults_equal_memory_prompt(tmp_path, embedder):
    store = tmp_path / "p"
    mem = Memory(store, embedder=embedder)
    mem.add_many([m for i in range(150) for m in (
        {"role": "user", "content": f"Host {i} of the {['api', 'db', 'cache'][i % 3]} tier runs on port {9000 + i}."},
        {"role": "assistant", "content": f"Noted: host {i}, port {9000 + i}."},
    )])
    lib = mem.prompt("Which port does db host 40 use?", budget=6000)
    mem.close()
    result = CliRunner().invoke(cli, ["--store", str(store), "--json", "prompt", "Which port does db host 40 use?", "--budget", "6000"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["messages"] == lib.messages and out["trace"]["total_tokens"] == lib.trace.total_tokens


def test_search_min_score(mem):
    mem.add_many([{"role": "user", "content": "The dance studio is on Baker Street."},
                  {"role": "user", "content": "Quarterly tax filing is due in April."}])
    hits = mem.search("where is the dance studio", k=5)
    assert len(hits) == 2
    strict = mem.search("where is the dance studio", k=5, min_score=0.3)
    assert [h.message.text for h in strict] == ["The dance studio is on Baker Street."]
    assert strict[0].similarity >= 0.3 and hits[1].similarity < 0.3 < hits[1].score  # fused scores are relative
    assert mem.search("volcanic eruptions on Io", k=5, min_score=0.3) == []



def test_forget_where_expires_by_time_role_and_metadata_keeping_units_whole(tmp_path, embedder):
    from datetime import datetime, timezone

    from ragmem._errors import UsageError

    old, new = datetime(2023, 1, 1, tzinfo=timezone.utc), datetime(2025, 1, 1, tzinfo=timezone.utc)
    mem = Memory(tmp_path / "fw", embedder=embedder, session="a")
    mem.add_many([
        {"role": "user", "content": "old question about the cache", "created_at": old},
        {"role": "assistant", "content": None, "created_at": old, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "cache_stats", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "hit rate 40%", "created_at": new},  # newer, same unit
        {"role": "user", "content": "new question about billing", "created_at": new, "metadata": {"topic": "billing"}},
    ])
    mem.for_session("b").add({"role": "user", "content": "old note in another session", "created_at": old})
    with pytest.raises(UsageError, match="needs a message id or a filter"):
        mem.forget()
    gone = mem.forget(until=datetime(2024, 1, 1, tzinfo=timezone.utc))
    assert len(gone) == 3  # the tool result went with its call, though it is newer
    assert [m.text for m in mem.messages()] == ["new question about billing"]
    assert mem.search("cache hit rate", k=5) and all("cache" not in h.message.text for h in mem.search("cache hit rate", k=5))
    assert len(mem.messages("b")) == 1  # another session is untouched by the session scope
    assert len(mem.forget(until=datetime(2024, 1, 1, tzinfo=timezone.utc), scope="namespace")) == 1
    assert mem.forget(where={"topic": "billing"}) and mem.messages() == []
    mem.close()


EXPANDER_MODULE = textwrap.dedent('''
    import json, os
    from ragmem import LLMQueryExpander

    def _complete(prompt):
        # a scripted "model": the question it was asked goes to a file the test reads
        path = os.environ.get("RAGMEM_TEST_EXPANDER_LOG")
        if path:
            with open(path, "a") as f:
                f.write(json.dumps(prompt.rsplit("Question:", 1)[-1].strip()) + "\\n")
        return "- physio ligament rest"

    def expander():
        return LLMQueryExpander(_complete, max_queries=2)

    def plain(question):
        return ["physio ligament rest"]

    class Made:
        def __call__(self, question):
            return ["physio"]

    not_callable = 42
''')

KNEE = [{"role": "user" if i % 2 == 0 else "assistant",
         "content": f"The doctor appointment for my knee moved again, note {i}. The weather is rainy."}
        for i in range(30)]
KNEE.insert(11, {"role": "user", "content": "The physio said the ligament needs six weeks of rest.", "id": "physio"})


@pytest.fixture
def expander_module(tmp_path, monkeypatch):
    (tmp_path / "my_expanders.py").write_text(EXPANDER_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("RAGMEM_TEST_EXPANDER_LOG", str(tmp_path / "asked.jsonl"))
    return tmp_path / "asked.jsonl"


def test_a_query_expander_loads_from_an_import_path(expander_module):
    from ragmem import LLMQueryExpander
    from ragmem._config import load_query_expander

    assert isinstance(load_query_expander("my_expanders:expander"), LLMQueryExpander)  # a factory, called
    assert load_query_expander("my_expanders:plain")("q?") == ["physio ligament rest"]  # a function, used
    assert load_query_expander("my_expanders:Made")("q?") == ["physio"]  # a class, made
    with pytest.raises(UsageError, match="not a callable"):
        load_query_expander("my_expanders:not_callable")
    with pytest.raises(UsageError, match="import path"):
        load_query_expander("my_expanders.expander")
    with pytest.raises(UsageError, match="cannot be imported"):
        load_query_expander("no_such_module_xyz:expander")


def test_the_store_config_gives_every_tool_its_query_expander(tmp_path, embedder, expander_module, monkeypatch):
    store = tmp_path / "qx"
    with Memory(store, embedder=embedder) as mem:
        mem.add_many(KNEE)
        assert mem.settings.query_expander is None
    (store / "ragmem.toml").write_text('query_expander = "my_expanders:expander"\n')
    monkeypatch.setenv("RAGMEM_TRUST_STORE_CONFIG", "1")  # an import path in the folder's file: the caller opts in
    with Memory(store, embedder=embedder) as mem:
        ctx = mem.prompt("What did the doctor say about my knee?", budget=400)
        assert ctx.trace.queries == ["physio ligament rest"]
        assert mem.for_session("other").settings.query_expander is mem.settings.query_expander  # one, per store
        assert Memory(store=mem.store).settings.query_expander is mem.settings.query_expander
        assert Memory(store=mem.store, query_expander=None).settings.query_expander is None  # code wins
    result = CliRunner().invoke(cli, ["--store", str(store), "--json", "prompt", "What did the doctor say about my knee?",
                                      "--budget", "400"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["trace"]["queries"] == ["physio ligament rest"]
    result = CliRunner().invoke(cli, ["--store", str(store), "--json", "search", "What did the doctor say about my knee?",
                                      "-k", "5"])
    assert result.exit_code == 0 and "physio" in [h["message"]["id"] for h in json.loads(result.output)]
    asked = [json.loads(line) for line in expander_module.read_text().splitlines()]
    assert asked == ["What did the doctor say about my knee?"] * 3  # one call per opened store and question
    monkeypatch.setenv("RAGMEM_QUERY_EXPANDER", "no_such_module_xyz:expander")  # the environment wins, and is checked
    with pytest.raises(UsageError, match="cannot be imported"):
        Memory(store, embedder=embedder)
