"""What a long message is indexed as: pieces cut where it breaks, each carrying its call's head; errors first."""

from __future__ import annotations

import json

import pytest

from ragmem import Memory
from ragmem._indexing import call_parts, chunks_of, document_text, error_lines, indexed_parts, lexical_text
from ragmem._messages import ToolCall, parse_message
from ragmem.embed import chunk_text
from ragmem.embed._base import split_text

#: A cargo build's output: boilerplate, then the error that matters, then more boilerplate.
CARGO = "\n".join(
    [f"   Compiling crate{i} v0.{i}.0 (/home/dev/ocodex/crate{i})" for i in range(60)]
    + ["error[E0433]: failed to resolve: there are too many leading `super` keywords",
       "  --> orchestrator/src/patterns/mod.rs:55:41", "   |"]
    + [f"   Compiling other{i} v1.{i}.0 (/home/dev/ocodex/other{i})" for i in range(60)]
    + ["error: could not compile `orchestrator` (lib) due to 1 previous error"]
)


def _call(name: str, **args) -> ToolCall:
    return ToolCall("c1", name, json.dumps(args))


def _result(text: str) -> dict:
    return {"role": "tool", "tool_call_id": "c1", "content": text}


def test_a_call_shows_its_short_arguments_whole_and_its_long_ones_by_their_first_line():
    head, long = call_parts(_call("Bash", command="cargo build -p orchestrator", timeout=120000))
    assert head == "Bash(command: cargo build -p orchestrator, timeout: 120000)" and long == []
    patch = "*** Begin Patch\n*** Update File: src/lib.rs\n@@\n-pub mod a;\n+pub mod b;\n*** End Patch"
    head, long = call_parts(ToolCall("c2", "shell", json.dumps({"command": ["apply_patch", patch]})))
    assert head == "shell(command: apply_patch *** Begin Patch (files: src/lib.rs)…)" and long == [f"apply_patch {patch}"]
    assert call_parts(ToolCall("c3", "raw", "not json"))[0] == "raw(not json)"


def test_written_files_are_indexed_with_their_line_breaks():
    """Escaped line breaks glued "n" to each line's first word ("\\nclass" -> "nclass"): the lexical
    leg never matched the first word of a line of a file written whole."""
    content = "import os\nclass RetryPolicy:\n    pass\n"
    msg = parse_message({"role": "assistant", "content": None, "tool_calls": [
        {"id": "w1", "type": "function", "function": {"name": "Write", "arguments": json.dumps(
            {"file_path": "src/retry.py", "content": content})}}]})
    head, body = indexed_parts(msg)
    assert head == "assistant: [calls Write(file_path: src/retry.py, content: import os…)]" and body == content
    from ragmem._lexical import tokenize

    terms = tokenize(lexical_text(msg))
    assert "retrypolicy" in terms and "nclass" not in terms


def test_a_tool_result_is_headed_by_the_call_it_answers():
    msg = parse_message(_result("ok"))
    call = _call("Bash", command="npm test")
    assert document_text(msg, call) == "tool Bash(command: npm test) returned: ok"
    assert document_text(msg) == "tool returned: ok"


def test_error_lines_are_the_lines_that_say_what_went_wrong():
    assert error_lines(CARGO) == [
        "error[E0433]: failed to resolve: there are too many leading `super` keywords",
        "error: could not compile `orchestrator` (lib) due to 1 previous error"]
    assert error_lines("test result: ok. 175 passed; 0 failed; 0 ignored\nall good") == []
    assert error_lines("bash: line 1: just: command not found\nran cargo fmt instead\nok") == [
        "bash: line 1: just: command not found"]
    assert error_lines("Process exited with code 2\n" + "fine\n" * 5) == ["Process exited with code 2"]
    # when most of the output says so, nothing stands out
    assert error_lines("error: a\nerror: b\nok") == []


def test_pieces_end_where_the_text_breaks_and_fit_the_room():
    text = "\n\n".join("\n".join(f"block {b} line {i} " + "w" * 30 for i in range(6)) for b in range(20))
    pieces = split_text(text, range(len(text)), range(1, len(text) + 1), 600)
    assert len(pieces) > 5 and all(len(p) <= 600 for p in pieces)
    assert all(p.startswith("block ") and p.endswith("w" * 30) for p in pieces)  # whole lines, never mid-line
    assert sum(p.startswith(f"block {b} line 0 ") for p in pieces for b in range(20)) >= len(pieces) - 1  # at blocks


def test_each_piece_of_a_patch_carries_its_files_header():
    files = [f"*** Update File: src/module{f}.py\n" + "\n".join(f"+    value_{f}_{i} = {i}" for i in range(40))
             for f in range(3)]
    text = "*** Begin Patch\n" + "\n".join(files) + "\n*** End Patch"
    head = "assistant: [calls apply_patch(…)]"
    pieces = split_text(text, range(len(text)), range(1, len(text) + 1), 500, head=head, head_tokens=len(head) + 1)
    assert len(pieces) > 4 and all(len(p) <= 500 for p in pieces)
    for p in pieces:
        assert p.startswith(head + "\n")
        values = {int(x.split("_")[1]) for x in p.split() if x.startswith("value_")}
        files_named = {int(x.rsplit("module", 1)[1][:-3]) for x in p.split() if x.startswith("src/module")}
        assert values <= files_named  # every piece names the file its lines belong to


def test_a_line_longer_than_the_room_is_cut_into_overlapping_windows():
    text = "short\n" + "x" * 2500 + "\nend"
    pieces = split_text(text, range(len(text)), range(1, len(text) + 1), 1000, overlap=100)
    assert all(len(p) <= 1000 for p in pieces) and pieces[0].startswith("short")
    assert "".join(pieces).count("x") > 2500  # windows overlap
    assert chunk_text("word " * 600)[0].startswith("word")  # one line of words: cut on spaces, as before


def test_every_piece_of_a_long_output_carries_the_call_and_the_errors_get_one_of_their_own(hash_embedder):
    call = _call("Bash", command="cargo build -p orchestrator")
    pieces = chunks_of(parse_message(_result(CARGO)), call, hash_embedder)
    head = "tool Bash(command: cargo build -p orchestrator) returned:"
    assert len(pieces) > 3 and all(p.startswith(head + "\n") for p in pieces)
    assert pieces[-1] == head + "\n" + "\n".join(error_lines(CARGO))
    # a short output is one piece: the error lines are all of it already
    assert chunks_of(parse_message(_result("bash: just: command not found")), call, hash_embedder) == [
        head + "\nbash: just: command not found"]


def test_a_plug_in_chunker_without_a_head_cuts_the_whole_text(hash_embedder):
    class Plain(type(hash_embedder)):
        def chunk(self, text):
            return [text[i:i + 500] for i in range(0, len(text), 500)]

    pieces = chunks_of(parse_message(_result(CARGO)), _call("Bash", command="cargo build"), Plain())
    assert pieces[0].startswith("tool Bash(command: cargo build) returned: ") and len(pieces) > 3


def test_error_lines_weigh_more_in_the_lexical_leg(tmp_path, hash_embedder):
    from ragmem._recall import lexical_candidates

    mem = Memory(tmp_path / "s", embedder=hash_embedder)
    noisy = "\n".join([f"resolve step {i}: fetching crate metadata" for i in range(40)]
                      + ["error[E0433]: failed to resolve: too many leading super keywords"])
    mem.add_many([
        {"role": "user", "content": "resolve the crate metadata, please"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "b1", "type": "function", "function": {"name": "Bash", "arguments": '{"command": "cargo build"}'}}]},
        {"role": "tool", "tool_call_id": "b1", "content": noisy, "id": "build"},
    ])
    body = dict(mem.store.log._rows("SELECT mid, body FROM lexical"))["build"].split()
    assert body.count("e0433") == 2  # the error line's words twice, the boilerplate's once per line
    hits = lexical_candidates(mem.store.log, "failed to resolve super keywords", namespace="default",
                              session="default", n=3)
    assert hits[0].message_id == "build"
    mem.close()


def test_the_lexical_leg_reads_a_giant_outputs_end_and_its_errors(tmp_path, hash_embedder):
    """It read the first 100,000 characters: an error in the middle or a summary at the end was never found."""
    from ragmem._recall import lexical_candidates

    filler = "\n".join(f"downloading package number {i} of the registry" for i in range(12_000))  # ~550,000 chars
    text = filler[:300_000] + "\nnpm ERR! peer dependency zyxwvut conflicts\n" + filler[300_000:] + "\nsummary: quuxbaz"
    mem = Memory(tmp_path / "s", embedder=hash_embedder, max_chars=1_000_000)
    mem.add({"role": "user", "content": text}, id="log")
    for word in ("zyxwvut", "quuxbaz"):
        hits = lexical_candidates(mem.store.log, word, namespace="default", session="default", n=1)
        assert [h.message_id for h in hits] == ["log"], word
    mem.close()


@pytest.mark.model
def test_the_bundled_models_pieces_fit_the_window_and_carry_the_head(embedder):
    from tokenizers import Tokenizer

    from ragmem.embed._bundled import bundled_model_path

    tok = Tokenizer.from_file(str(bundled_model_path(verify=False) / "tokenizer.json"))
    tok.no_truncation()
    call = _call("Bash", command="cargo build -p orchestrator")
    pieces = chunks_of(parse_message(_result(CARGO)), call, embedder)
    assert len(pieces) > 3
    for p in pieces:
        assert p.startswith("tool Bash(command: cargo build -p orchestrator) returned:\n")
        assert len(tok.encode(p).ids) <= 256
    assert "error[E0433]" in pieces[-1] and "Compiling" not in pieces[-1]


@pytest.mark.model
def test_a_question_about_the_build_finds_the_error_in_a_long_output(tmp_path, embedder):
    mem = Memory(tmp_path / "s", embedder=embedder)
    mem.add_many([
        {"role": "user", "content": "make the roles dynamic"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
            "name": "Bash", "arguments": '{"command": "cargo build -p orchestrator"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": CARGO, "id": "build"},
        *[{"role": "user" if i % 2 else "assistant", "content": f"note {i} about the docs layout and the README"}
          for i in range(30)],
    ])
    dense = mem.search("which compile error did the orchestrator build hit?", k=3)
    assert "build" in [h.message.id for h in dense]
    mem.close()


def test_a_store_from_before_decoded_arguments_is_relexed_on_open(tmp_path, hash_embedder):
    """A row written before the arguments were decoded ("\\nclass" read as "nclass") is rewritten once on open."""
    from ragmem import _lexical as lexical
    from ragmem._recall import lexical_candidates

    write = {"id": "w1", "type": "function", "function": {"name": "Write", "arguments": json.dumps(
        {"file_path": "src/retry.py", "content": "import os\nclass RetryPolicy:\n    pass\n"})}}
    with Memory(tmp_path / "s", embedder=hash_embedder) as mem:
        mem.add_many([{"role": "user", "content": "write the retry policy"},
                      {"role": "assistant", "content": None, "tool_calls": [write], "id": "call"},
                      {"role": "tool", "tool_call_id": "w1", "content": "File created", "id": "done"},
                      {"role": "user", "content": "thanks, lunch now"}])
        log = mem.store.log
        old = f"assistant {json.dumps(write['function']['arguments'])}"  # the escaped JSON of before
        log.lexical.put_lexical("default", [("call", lexical.scope_text("default", "default"),
                                             " ".join(lexical.tokenize(old)))])
        log.meta.set("lexical_terms", "2")
    with Memory(tmp_path / "s", embedder=hash_embedder) as mem:
        assert mem.store.repaired.get("relexed") == 3  # the call, its result, and the turn after the result
        hits = lexical_candidates(mem.store.log, "RetryPolicy", namespace="default", session=None, n=3)
        assert "call" in [h.message_id for h in hits]
        assert mem.store.log.meta.get("lexical_terms") == "3"


def test_reindex_reports_its_progress_and_rebuilds_the_chunks(tmp_path, hash_embedder):
    """``ragmem reindex`` brings a store's vectors to today's chunks; its bar is fed by ``progress``."""
    with Memory(tmp_path / "s", embedder=hash_embedder) as mem:
        mem.add_many([{"role": "user", "content": f"turn {i}"} for i in range(30)]
                     + [{"role": "assistant", "content": None, "tool_calls": [{"id": "b1", "type": "function",
                         "function": {"name": "Bash", "arguments": '{"command": "cargo build"}'}}]},
                        {"role": "tool", "tool_call_id": "b1", "content": CARGO, "id": "build"}])
        seen: list[tuple[int, int]] = []
        assert mem.store.reindex("default", progress=lambda done, total: seen.append((done, total))) == 32
        assert seen[-1] == (32, 32) and [d for d, _ in seen] == sorted(d for d, _ in seen)
        expected = len(chunks_of(mem.get("build"), ToolCall("b1", "Bash", '{"command": "cargo build"}'),
                                 hash_embedder))
        assert mem.store.index.chunk_counts("default")["build"] == expected > 3


@pytest.mark.model
def test_a_store_of_the_default_model_cuts_as_the_model_does(tmp_path):
    """A store's embedder is the index owner's shared model: its pieces are the engine's, heads included."""
    from ragmem.embed import default_embedder

    msg, call = parse_message(_result(CARGO)), _call("Bash", command="cargo build -p orchestrator")
    with Memory(tmp_path / "s") as mem:
        mem.add({"role": "user", "content": "open the index"})
        shared = mem.store.embedder
        assert chunks_of(msg, call, shared) == chunks_of(msg, call, default_embedder()) != [document_text(msg, call)]
