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
        ("What did we set pool_size to?", ["set", "pool_size", "poolsize", "pool", "size"]),
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


# -- the tokeniser without its caches and fast paths, spelled out as the reference:
# the fast one must give byte-identical terms, or every stored index would silently disagree with queries.
_REF_WORD = re.compile(r"\d+(?:[.,:/]\d+)*|[^\W_](?:[\w']*[^\W_])?", re.UNICODE)
_REF_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_REF_SPAN = re.compile(r"\w+(?:[./-]+\w+)+")
_REF_HASH = re.compile(r"(?<!\w)[0-9a-fA-F]{7,64}(?!\w)")
_REF_STEMMER = Stemmer.Stemmer("english")


def _ref_word_tokens(raw: str) -> tuple[list[str], list[str]]:
    if raw[0].isdigit() and all(c.isdigit() or c in ".,:/" for c in raw):
        return [], [raw.rstrip(".,:/")]
    word = raw[:-2] if raw.endswith(("'s", "’s")) else raw
    word = word.replace("'", "").replace("’", "")
    if not word:
        return [], []
    parts = [p for p in re.split(r"_+", word) if p]
    split: list[str] = []
    for p in parts:
        if not p.islower() and not p.isupper():
            pieces = _REF_CAMEL.findall(p)
        elif re.fullmatch(r"[A-Za-z]+\d+", p):
            pieces = [re.match(r"[A-Za-z]+", p)[0], re.search(r"\d+$", p)[0]]
        else:
            pieces = [p]
        split.extend(pieces or [p])
    lower = word.lower()
    if len(split) <= 1:
        return [], [lower]
    return [lower] + (["".join(parts).lower()] if len(parts) > 1 else []), [s.lower() for s in split]


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
    wholes, parts = _ref_word_tokens(raw)
    def kept(ts: list[str]) -> list[str]:
        return [t for t in ts if t and t not in lexical.STOPWORDS and (len(t) > 1 or t.isdigit())]

    return kept(wholes) + [t if t[0].isdigit() else _REF_STEMMER.stemWord(t) for t in kept(parts)]


def _ref_plain(text: str) -> list[str]:
    """Words, and commit hashes (hex digits with a digit and a letter) whole and by their first 7."""
    out, pos = [], 0
    for m in _REF_HASH.finditer(text):
        if m[0].isdigit() or m[0].isalpha():
            continue
        out += [t for raw in _REF_WORD.findall(text[pos : m.start()]) for t in _ref_terms(raw)]
        h = m[0].lower()
        out += [h, h[:7]] if len(h) > 7 else [h]
        pos = m.end()
    return out + [t for raw in _REF_WORD.findall(text[pos:]) for t in _ref_terms(raw)]


def _ref_span(span: str) -> list[str]:
    """The whole forms of a word joined by dots, slashes or hyphens."""
    v = re.fullmatch(r"[vV]?(\d+(?:\.\d+)+)", span)
    if v:
        pieces = v[1].split(".")
        return ([v[1]] if span[0] in "vV" else []) + ([f"{pieces[0]}.{pieces[1]}"] if len(pieces) > 2 else [])
    if len(span) > 200 or all(p.isdigit() for p in re.split(r"[./-]+", span)):
        return []
    name = span.rsplit("/", 1)[-1]
    return [span.lower().replace("-", "")] + (_ref_span(name) if "/" in span and re.search(r"[./-]", name) else [])


def reference_tokenize(text: str) -> list[str]:
    out = []
    for chunk in unicodedata.normalize("NFKC", text).split():
        pos = 0
        for m in _REF_SPAN.finditer(chunk):
            out += _ref_plain(chunk[pos : m.start()]) + _ref_span(m[0]) + _ref_plain(m[0])
            pos = m.end()
        out += _ref_plain(chunk[pos:])
    return out


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
    assert tokenize("iPhone手机 pool_size") == ["iphone", "phone", "手机", "pool_size", "poolsize", "pool", "size"]
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
        db.execute("DELETE FROM meta WHERE key IN ('lexical_pairs', 'lexical_terms')")
        db.commit()
        db.close()
        assert not lexical_candidates(log, "我们家养的是什么宠物？", namespace="default", session=None, n=5)
    with Memory(tmp_path / "s", embedder=HashEmbedder()) as mem:
        assert mem.store.repaired.get("relexed") == 2  # the Chinese turn, and the turn after it (its row carries it)
        hits = lexical_candidates(mem.store.log, "我们家养的是什么宠物？", namespace="default", session=None, n=5)
        assert [c.message_id for c in hits][:1] == [mem.store.log.messages("default", "default")[0].id]
    with Memory(tmp_path / "s", embedder=HashEmbedder()) as mem:
        assert "relexed" not in mem.store.repaired


# -- code words found as written (issue 35, item 4) ---------------------------------------------------

HASH = "9cc4ede1a2b3c4d5e6f708192a3b4c5d6e7f8091"
#: (the code word as a message says it, queries by its whole form, queries by its parts)
CODE_WORDS = [
    ("src/timer.js", ["src/timer.js", "timer.js", "./src/timer.js"], ["timer", "src"]),
    ("./tests/test_x.py", ["tests/test_x.py", "test_x.py"], ["test_x", "tests", "py"]),
    ("start_timer", ["start_timer", "startTimer", "start-timer"], ["start timer", "timer"]),
    ("startTimer", ["startTimer", "start_timer", "StartTimer"], ["start timer", "start"]),
    ("TS2307", ["TS2307", "ts2307"], ["2307"]),
    ("E0308", ["E0308", "error[E0308]"], ["0308"]),
    ("--no-verify", ["--no-verify", "no-verify", "noVerify", "no_verify"], ["verify"]),
    ("v1.2.3", ["v1.2.3", "1.2.3"], ["1.2"]),
    ("0.47.0", ["0.47.0", "v0.47.0"], ["0.47"]),
    (HASH, [HASH, HASH[:7]], [HASH[:7]]),
    (HASH[:7], [HASH[:7], HASH], []),
]


def _code_word_memory(tmp_path, log_url):
    """One session per message (no row carries another's words): each code word in a sentence, and a
    shorter decoy that holds its parts as separate words, which BM25 would rank first without the whole form."""
    from ragmem.testing import HashEmbedder

    mem = Memory(tmp_path / "s", embedder=HashEmbedder(), log_url=log_url)
    for i, (word, _, _) in enumerate(CODE_WORDS):
        mem.for_session(f"target-{i}").add({"role": "user", "content": f"the failing step named {word} again today"},
                                          id=f"t{i}")
        parts = " ".join(re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+", word))  # src timer js, start Timer
        mem.for_session(f"decoy-{i}").add({"role": "user", "content": parts}, id=f"d{i}")
    for j in range(30):  # enough rows that the common words are not most of the index
        mem.for_session(f"other-{j}").add({"role": "user", "content": f"unrelated chatter number {j} about lunch"})
    return mem


def test_code_words_are_found_by_their_whole_form_and_by_their_parts(tmp_path, log_url):
    """Each code word of the table: its message is among the first hits of every whole form, ahead of a shorter
    decoy of the same parts, and among the hits of each of its parts, on both logs."""
    from ragmem._recall import lexical_candidates

    mem = _code_word_memory(tmp_path, log_url)
    try:
        def hits(query: str) -> list[str]:
            found = lexical_candidates(mem.store.log, query, namespace="default", session=None, n=10)
            return [c.message_id for c in found]

        for i, (word, wholes, parts) in enumerate(CODE_WORDS):
            for q in wholes:  # start_timer's and startTimer's messages share a whole form: both come first
                found = hits(q) + [f"d{i}"]
                assert f"t{i}" in found[:2] and found.index(f"t{i}") < found.index(f"d{i}"), (word, q, found)
            for q in parts:
                assert f"t{i}" in hits(q), (word, q, hits(q))
        # the brief's own examples, through search as a developer types them
        assert f"t{0}" in hits("which test covers timer.js?")
    finally:
        mem.close()


def test_a_store_from_before_code_words_is_relexed_once_on_open(tmp_path, log_url):
    """Rows written with the terms of before (no whole forms) are rewritten from the log on the next open, on
    both logs; only the rows whose terms changed (and the row after each), and once."""
    from ragmem._recall import lexical_candidates
    from ragmem.testing import HashEmbedder

    with Memory(tmp_path / "s", embedder=HashEmbedder(), log_url=log_url) as mem:
        mem.add_many([{"role": "user", "content": "the weather is fine"}, {"role": "assistant", "content": "good"},
                      {"role": "user", "content": "the bug is in src/timer.js"}, {"role": "assistant", "content": "ok"},
                      {"role": "user", "content": "lunch was late"}])
        log = mem.store.log
        old = [(m.id, lexical.scope_text(m.namespace, m.session), " ".join(re.findall(r"[a-z]+", m.text.lower())))
               for m in log.messages("default", "default")]
        log.lexical.put_lexical("default", old)  # what a ragmem before code words wrote: no whole forms
        log.meta.set("lexical_terms", "1")
        assert not log.lexical.lexical_df(["timer.js"])[1].get("timer.js")
    with Memory(tmp_path / "s", embedder=HashEmbedder(), log_url=log_url) as mem:
        assert mem.store.repaired.get("relexed") == 2  # the turn with the path, and the turn after it
        ids = [m.id for m in mem.store.log.messages("default", "default")]
        hits = lexical_candidates(mem.store.log, "timer.js", namespace="default", session=None, n=5)
        assert {c.message_id for c in hits[:2]} == {ids[2], ids[3]}  # the path's turn, and the reply carrying it
        assert mem.store.log.lexical.lexical_df(["timer.js"])[1].get("timer.js") == 2  # the path's row, the next
        assert mem.store.log.meta.get("lexical_terms") == str(lexical.TERMS_VERSION)
    with Memory(tmp_path / "s", embedder=HashEmbedder(), log_url=log_url) as mem:
        assert "relexed" not in mem.store.repaired


def test_terms_changed_names_every_text_whose_terms_changed():
    """The rewrite's filter is a superset: a text it passes over has the same terms as the version before."""
    assert lexical.terms_changed("run src/timer.js", 1) and lexical.terms_changed("TS2307", 1)
    assert lexical.terms_changed("pool_size", 1) and lexical.terms_changed("commit 9cc4ede", 1)
    assert not lexical.terms_changed("the weather is fine, isn't it?", 1)
    assert not lexical.terms_changed("src/timer.js", 2)
    assert lexical.terms_changed("我的新公寓", 0) and not lexical.terms_changed("我的新公寓", 1)
