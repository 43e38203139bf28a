"""The lexical index: tokenisation (pure) and the FTS5 table kept in step with the log."""

from __future__ import annotations

import re
import sqlite3
import unicodedata

import pytest
import Stemmer
from hypothesis import given, settings
from hypothesis import strategies as st

from ragmem import Memory, _lexical as lexical
from ragmem._lexical import match_query, scope_token, tokenize


@pytest.mark.parametrize(
    "text, expected",
    [
        ("What did we set pool_size to?", ["set", "pool_size", "pool", "size"]),
        ("maxRetries", ["maxretries", "max", "retri"]),
        ("HTTPServer", ["httpserver", "http", "server"]),
        ("It was 3.5 GB at 10:30 on 2023-05-08", ["3.5", "gb", "10:30", "2023", "05", "08"]),
        ("Caroline's running shoes", ["carolin", "run", "shoe"]),
        ("When did you go there?", ["go"]),
    ],
)
def test_tokenize(text, expected):
    assert tokenize(text) == expected


def test_tokenize_keeps_numbers_unstemmed_and_drops_stopwords():
    toks = tokenize("The 40 connections and 45 retries were the limits")
    assert "40" in toks and "45" in toks
    assert "the" not in toks and "were" not in toks


def test_match_query_quotes_terms_and_scopes():
    q = match_query(["pool_size", 'a"b', "pool_size"], scope_token("ns", "s1"))
    assert q == f'scope : "{scope_token("ns", "s1")}" AND body : ("pool_size" OR "a""b")'
    assert match_query([], "x") is None
    assert scope_token("ns", "s1") != scope_token("ns", "s2") != scope_token("ns")


def _lexical_ids(mem: Memory) -> set[str]:
    return {r[0] for r in mem.store.log._rows("SELECT mid FROM lexical_map")}


def test_lexical_rows_follow_add_forget_and_repair(tmp_path, hash_embedder):
    mem = Memory(tmp_path / "s", session="a", embedder=hash_embedder)
    mem.add({"role": "user", "content": "Set pool_size to 40 on billing-db", "id": "u1"})
    mem.add({"role": "assistant", "content": "Done", "id": "a1",
             "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "set", "arguments": "{}"}}]})
    mem.add({"role": "tool", "tool_call_id": "c1", "content": '{"ok": true}', "id": "t1"})
    mem.for_session("b").add({"role": "user", "content": "pool_size is 45 elsewhere", "id": "u2"})
    assert _lexical_ids(mem) == {"u1", "a1", "t1", "u2"}
    # scoped inside the query: session b's message is never a candidate of session a
    assert mem.search("pool_size", k=5)[0].message.id == "u1"
    assert "u2" not in {h.message.id for h in mem.search("pool_size", k=5)}
    mem.forget("t1")  # the whole unit goes
    assert _lexical_ids(mem) == {"u1", "u2"}
    mem.for_session("b").forget_session()
    assert _lexical_ids(mem) == {"u1"}
    # a store whose lexical rows are gone (an older store) is rebuilt on open
    with mem.store.log._lock:
        mem.store.log._db.execute("DELETE FROM lexical")
        mem.store.log._db.execute("DELETE FROM lexical_map")
    mem.close()
    mem = Memory(tmp_path / "s", session="a", embedder=hash_embedder)
    assert _lexical_ids(mem) == {"u1"}
    mem.close()


def test_lexical_text_carries_the_previous_turn_and_the_call(tmp_path, hash_embedder):
    mem = Memory(tmp_path / "s", session="a", embedder=hash_embedder)
    mem.add_many([
        {"role": "user", "content": "Where did you move to?", "id": "q"},
        {"role": "assistant", "content": "Yes, in Sweden.", "id": "r"},
        {"role": "assistant", "content": None, "id": "c",
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_config",
                                                                      "arguments": '{"service": "auth-db"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": '{"pool": 12}', "id": "t"},
    ])
    body = dict(mem.store.log._rows("SELECT mid, body FROM lexical"))
    assert "move" in body["r"].split() and "sweden" in body["r"].split()
    assert {"get_config", "auth", "db"} <= set(body["t"].split())
    mem.close()


def test_fts5_available():
    """The lexical index needs SQLite's FTS5 with bm25(): a build without it fails here, not deep in a search."""
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE t USING fts5(x)")
    db.executemany("INSERT INTO t(x) VALUES (?)", [("the pool size is 40",), ("the weather is fine",)])
    rows = db.execute("SELECT x, bm25(t) FROM t WHERE t MATCH 'pool' ORDER BY bm25(t)").fetchall()
    assert [x for x, _ in rows] == ["the pool size is 40"] and rows[0][1] < 0  # bm25() is negative: lower is better


def test_cached_frequencies_never_hide_a_word_that_just_arrived(tmp_path, hash_embedder):
    from ragmem import Memory
    from ragmem._recall import lexical_candidates

    mem = Memory(tmp_path / "s", embedder=hash_embedder)
    mem.add({"role": "user", "content": "the weather is fine"}, id="w")
    assert lexical_candidates(mem.store.log, "zebrafish", namespace="default", session="default", n=5) == []
    mem.add({"role": "user", "content": "my code word is zebrafish"}, id="z")
    hits = lexical_candidates(mem.store.log, "zebrafish", namespace="default", session="default", n=5)
    assert [c.message_id for c in hits] == ["z"]


# -- the tokeniser before its per-word cache, kept verbatim as the reference:
# the fast one must give byte-identical terms, or every stored index would silently disagree with queries.
_REF_WORD = re.compile(r"\d+(?:[.,:/]\d+)*|[^\W_](?:[\w']*[^\W_])?", re.UNICODE)
_REF_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_REF_STEMMER = Stemmer.Stemmer("english")


def _ref_word_tokens(raw: str) -> list[str]:
    if raw[0].isdigit() and all(c.isdigit() or c in ".,:/" for c in raw):
        return [raw.rstrip(".,:/")]
    word = raw[:-2] if raw.endswith(("'s", "’s")) else raw
    word = word.replace("'", "").replace("’", "")
    if not word:
        return []
    parts = [p for p in re.split(r"_+", word) if p]
    split: list[str] = []
    for p in parts:
        pieces = _REF_CAMEL.findall(p) if not p.islower() and not p.isupper() else [p]
        split.extend(pieces or [p])
    lower = word.lower()
    if len(split) <= 1:
        return [lower]
    return [lower] + [s.lower() for s in split]


#: Scripts written without spaces, spelled out again (Thai, Lao, Myanmar, Khmer, kana, CJK ideographs).
_REF_NO_SPACES = re.compile("([\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u31f0-\u31ff"
                            "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f]+)")


def _ref_terms(raw: str) -> list[str]:
    if _REF_NO_SPACES.search(raw):  # runs of such scripts in overlapping pairs, the rest of the word as usual
        out: list[str] = []
        for i, part in enumerate(_REF_NO_SPACES.split(raw)):
            if i % 2:
                out += [part] if len(part) == 1 else [part[j : j + 2] for j in range(len(part) - 1)]
            elif part:
                out += _ref_terms(part)
        return out
    out = []
    toks = _ref_word_tokens(raw)
    for i, t in enumerate(toks):
        if not t or t in lexical.STOPWORDS or (len(t) == 1 and not t.isdigit()):
            continue
        if t[0].isdigit() or (i == 0 and len(toks) > 1):
            out.append(t)
        else:
            out.append(_REF_STEMMER.stemWord(t))
    return out


def reference_tokenize(text: str) -> list[str]:
    text = unicodedata.normalize("NFKC", text)
    return [t for raw in _REF_WORD.findall(text) for t in _ref_terms(raw)]


_pieces = st.one_of(
    st.text(max_size=30),
    st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_]{0,20}", fullmatch=True),  # identifiers: snake, camel, CAPS
    st.from_regex(r"\d{1,4}([.,:/]\d{0,3}){0,3}[.,:/]?", fullmatch=True),  # numbers, dates, times
    st.sampled_from(["Caroline's", "it’s", "don't", "The", "HTTPServer", "maxRetries", "__init__", "ＡＢＣ１２", "ﬁle",
                     "²³", "٣٤", "café", "naïve", "Straße", "I", "a_", "_x_", "x''y", "’s", "'s", "10:30.", "3.5.6",
                     "我的新公寓", "東京で", "iPhone手机", "猫", "สวัสดี"]),
)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(_pieces, st.sampled_from([" ", "", "\n", "-", ".", ", ", "'", "_", "/"])), max_size=12))
def test_tokenize_equals_the_reference(parts):
    text = "".join(p + sep for p, sep in parts)
    assert tokenize(text) == reference_tokenize(text)
    assert tokenize(text) == reference_tokenize(text)  # again, now from the per-word cache


def test_tokenize_equals_the_reference_when_the_cache_empties(monkeypatch):
    monkeypatch.setattr(lexical, "_TERMS_MAX", 3)
    # a full cache of other words: earlier tests of the run may have cached every word of the text
    monkeypatch.setattr(lexical, "_TERMS", {f"w{i}": (f"w{i}",) for i in range(3)})
    text = "Set pool_size to 40 on billing-db; maxRetries is 3.5 and the HTTPServer runs at 10:30 " * 2
    assert tokenize(text) == reference_tokenize(text)
    assert len(lexical._TERMS) <= 3


def test_tokenize_equals_the_reference_on_locomo():
    from benchmarks.locomo import data_dir, load_conversations

    try:
        convs = load_conversations(data_dir())
    except FileNotFoundError:
        pytest.skip("LoCoMo data not installed")
    # each turn as ingestion tokenises it (with its date and the turn before), and every question
    texts = [
        f"{t.content} {t.created_at.day} {t.created_at:%B %Y} {prev.content[:600]}"
        for c in convs
        for prev, t in zip(c.turns, c.turns[1:])
    ] + [q.question for c in convs for q in c.questions]
    assert len(texts) > 2700
    lexical._TERMS.clear()
    for text in texts:
        assert tokenize(text) == reference_tokenize(text), text


# -- scripts written without spaces (issue 26) -------------------------------------------------------


def test_scripts_without_spaces_are_cut_into_character_pairs():
    """A run of Chinese or Japanese is one 'word' to the regex: cut into pairs, a question shares terms with it."""
    assert tokenize("我的新公寓在上海浦东") == ["我的", "的新", "新公", "公寓", "寓在", "在上", "上海", "海浦", "浦东"]
    assert tokenize("猫") == ["猫"]  # a lone character is kept
    assert tokenize("iPhone手机 pool_size") == ["iphone", "phone", "手机", "pool_size", "pool", "size"]
    assert tokenize("東京で働く") == ["東京", "京で", "で働", "働く"]
    assert tokenize("สวัสดีครับ")[0] == "สว"  # Thai, written without spaces too (its vowel marks split words)
    assert tokenize("Jag flyttade till Umeå") == ["jag", "flyttad", "till", "umeå"]  # spaced scripts unchanged
    assert set(tokenize("我的新家在哪个区")) & set(tokenize("我的新公寓在上海浦东，离地铁站只有五分钟。"))


@given(st.text(alphabet=st.sampled_from("我的新公寓在上海浦东東京でa b")))
@settings(max_examples=200, deadline=None)
def test_pairs_are_the_same_at_index_and_query_time(text):
    """One function cuts both sides: a text's terms are its own terms, whatever the split into words."""
    assert tokenize(text) == tokenize(text)
    for term in tokenize(text):
        assert lexical.has_no_space_script(term) <= (len(term) <= 2)


def test_a_store_from_before_the_pairs_is_relexed_once_on_open(tmp_path):
    """Rows written with a whole run as one term are rewritten from the log on open; later opens do nothing."""
    from ragmem._recall import lexical_candidates
    from ragmem.testing import HashEmbedder

    fact = "我对猫毛过敏，所以我们家养了一只乌龟。"
    with Memory(tmp_path / "s", embedder=HashEmbedder()) as mem:
        mem.add_many([{"role": "user", "content": fact}, {"role": "assistant", "content": "ok"},
                      {"role": "user", "content": "the harbour crane broke"}])
        log = mem.store.log
        old = [(m.id, lexical.scope_text(m.namespace, m.session), " ".join(re.findall(r"\w+", m.text)))
               for m in log.messages("default", "default")]
        log.lexical.put_lexical("default", old)  # what an older ragmem wrote: whole runs
        db = sqlite3.connect(tmp_path / "s" / "log.sqlite3")
        db.execute("DELETE FROM meta WHERE key='lexical_pairs'")
        db.commit()
        db.close()
        assert not lexical_candidates(log, "我们家养的是什么宠物？", namespace="default", session=None, n=5)
    with Memory(tmp_path / "s", embedder=HashEmbedder()) as mem:
        assert mem.store.repaired.get("relexed") == 2  # the Chinese turn, and the turn after it (its row carries it)
        hits = lexical_candidates(mem.store.log, "我们家养的是什么宠物？", namespace="default", session=None, n=5)
        assert [c.message_id for c in hits][:1] == [mem.store.log.messages("default", "default")[0].id]
    with Memory(tmp_path / "s", embedder=HashEmbedder()) as mem:
        assert "relexed" not in mem.store.repaired
