"""From stored messages to vectors: what text is indexed, chunking, and the write to the index.

Each message is indexed with the context it needs to be found: its role, and
for a tool result the name and arguments of the call it answers (a bare
``{"rows": 3}`` means nothing alone). Long texts are chunked to the model's
window; every chunk carries its message id, so hits map back to messages.

The lexical index (:mod:`ragmem._lexical`) gets more context than the vectors,
because it costs nothing at ingest: the message's date and the turn before it
(the question a reply answers, the tool result an explanation follows). A
reply such as "Yes, in Sweden" is then found by the words of its question.
Measured on LoCoMo, this lifts BM25 recall@10 from 0.63 to 0.75; the same
context in the embedded text gains dense recall little (+0.01 after fusion)
and doubles the encoder's work, so the vectors keep the message alone.
"""

from __future__ import annotations

import inspect
import json
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Sequence

from . import _lexical as lexical
from .embed import Embedder, chunk_text
from ._messages import Message, ToolCall
from ._settings import DEFAULT_RECALL, RecallSettings
from ._tokens import TokenCounter, count_message
from ._store import Log as MessageLog, Index
from ._store.filters import META_PREFIX
from ._store.index import chunk_id


#: A call's argument shown whole in the call's head when it is one line of at most this many characters;
#: a longer one (a file written whole, a patch) is shown by its first line, and indexed in the body.
HEAD_VALUE_CHARS = 120
#: The most characters of a call's head (its name and its short arguments).
HEAD_CHARS = 300
#: An assistant's text that stays in the head of its message with tool calls when it is at most this long.
HEAD_TEXT_CHARS = 300
#: The files a patch or diff in a long argument names (``*** Update File: src/x.rs``, ``+++ b/src/x.rs``,
#: ``diff --git a/src/x.rs b/src/x.rs``): the head names the first :data:`HEAD_FILES` of them, so that what a
#: patch did, and what its result said, is found by the file it changed.
_PATCHED_FILE = re.compile(r"^(?:\*\*\* (?:Update|Add|Delete) File: |\+\+\+ b/|diff --git a/)(\S+)", re.MULTILINE)
HEAD_FILES = 3


def _value_text(v: Any) -> str:
    """An argument's value as text: a string as it is (decoded, real line breaks), a list of strings
    joined by spaces (a command's argv), anything else as compact JSON."""
    if isinstance(v, str):
        return v
    if isinstance(v, list) and all(isinstance(x, str) for x in v):
        return " ".join(v)
    return json.dumps(v, ensure_ascii=False)


def call_parts(c: ToolCall) -> tuple[str, list[str]]:
    """A call as its head, ``NAME(key: value, ...)``, and its long argument values, decoded.

    The head holds every argument whose value is one short line whole (the command, the path, the
    pattern) and a long one by its first line, so that every piece of what the call did or returned is
    found by "the build" or "the migration file"; the long values (a file written whole, a patch) are
    the call's body, with their line breaks, so they can be cut where they break. Arguments that are not
    a JSON object are one value.

    >>> call_parts(ToolCall("c1", "Write", '{"file_path": "db/0007_retry.sql", "content": "CREATE TABLE t (\\\\n  id int\\\\n);"}'))
    ('Write(file_path: db/0007_retry.sql, content: CREATE TABLE t (…)', ['CREATE TABLE t (\\n  id int\\n);'])
    """
    try:
        args = json.loads(c.arguments)
    except ValueError:
        args = c.arguments
    items = list(args.items()) if isinstance(args, dict) else [("", args)]
    shown: list[str] = []
    long: list[str] = []
    for key, v in items:
        text = _value_text(v)
        if len(text) <= HEAD_VALUE_CHARS and "\n" not in text:
            shown.append(f"{key}: {text}" if key else text)
            continue
        first = text.strip().split("\n", 1)[0][:HEAD_VALUE_CHARS]
        files = list(dict.fromkeys(_PATCHED_FILE.findall(text)))[:HEAD_FILES]
        first += f" (files: {', '.join(files)})" if files else ""
        shown.append(f"{key}: {first}…" if key else f"{first}…")
        long.append(text)
    head = f"{c.name}({', '.join(shown)})"
    return (head if len(head) <= HEAD_CHARS else head[: HEAD_CHARS - 2] + "…)"), long


def indexed_parts(m: Message, call: ToolCall | None = None) -> tuple[str, str]:
    """What a message is and what it holds, as indexed: ``(head, body)``.

    The head opens every piece of the message's vectors: the role; for a tool result, the call it
    answers (``tool NAME(args) returned:``, :func:`call_parts`); for an assistant's tool calls, its short
    text and each call's head. The body is the rest: the text, and the long arguments of the calls.
    """
    if m.role == "tool":
        return (f"tool {call_parts(call)[0]} returned:" if call else "tool returned:"), m.text
    if m.tool_calls:
        parts = [call_parts(c) for c in m.tool_calls]
        listed = "; ".join(h for h, _ in parts)
        bodies = "\n\n".join(v for _, long in parts for v in long)
        text = m.text
        if len(text) <= HEAD_TEXT_CHARS:
            return f"{m.role}: {text} [calls {listed}]".replace(":  [", ": ["), bodies
        return f"{m.role}: [calls {listed}]", f"{text}\n\n{bodies}" if bodies else text
    return f"{m.role}:", m.text


def document_text(m: Message, call: ToolCall | None = None) -> str:
    """The text a message is indexed as, whole: its head and its body (:func:`indexed_parts`)."""
    head, body = indexed_parts(m, call)
    return f"{head} {body}" if body else head


#: What says that something went wrong, in a line of a tool's output: an error or failure named (``error:``,
#: ``error[E0433]``, ``FAILED``, ``TypeError``, ``Traceback``, ``npm ERR!``), a shell's complaint ("command not
#: found", "No such file", "Permission denied") or a non-zero exit code.
ERROR_LINE = re.compile(
    r"\b(?:error|errors|ERROR|Error|FAILED|FAIL|FATAL|fatal|panicked|Traceback|Exception|failed|Failed|failure"
    r"|denied|refused|cannot|Cannot|unable|Unable)\b|\w(?:Error|Exception)\b|\b[A-Z]{1,3}\d{3,5}\b"
    r"|exit (?:code|status)[: ]+-?[1-9]|exited with (?:code )?-?[1-9]|command not found|[Nn]o such file"
    r"|[Nn]ot found|[Cc]ould not|[Cc]ouldn't|ERR!"
)
#: Counts of nothing ("0 failed", "0 errors") are not errors.
_NO_ERRORS = re.compile(r"\b0 (?:errors?|failed|failures?)\b|\bno errors?\b", re.IGNORECASE)
#: The most characters of one error line kept, and of all of them.
ERROR_LINE_CHARS, ERRORS_CHARS = 300, 4_000


def error_lines(text: str) -> list[str]:
    """The lines of a tool's output that say what went wrong (:data:`ERROR_LINE`), in order, each once,
    at most :data:`ERRORS_CHARS` characters in all; none when they are most of the output (nothing
    stands out then).

    >>> error_lines("   Compiling app v0.1.0\\nerror[E0433]: failed to resolve\\n  --> src/lib.rs:5:1\\nok")
    ['error[E0433]: failed to resolve']
    """
    if not ERROR_LINE.search(text):
        return []
    out: list[str] = []
    seen: set[str] = set()
    size = 0
    lines = text.splitlines()
    for line in lines:
        if not ERROR_LINE.search(_NO_ERRORS.sub("", line)):
            continue
        line = line.strip()[:ERROR_LINE_CHARS]
        if line in seen:
            continue
        seen.add(line)
        out.append(line)
        size += len(line) + 1
        if size >= ERRORS_CHARS:
            break
    return out if 2 * len(out) <= len(lines) else []


#: Chunks of one message that go into the vector index: its first 1,000 (about 220,000 tokens with the
#: bundled model, so a 1,000,000-character message of prose is embedded nearly whole). Cost follows
#: tokens, not characters: 900,000 characters of "1/" made 4,054 chunks, and one add() ran for minutes.
#: The log, exports and prompts keep the message whole; only the vectors stop at this many chunks.
MAX_CHUNKS = 1_000


def chunks_of(m: Message, call: ToolCall | None, embedder: Any) -> list[str]:
    """The texts a message's vectors are made of: its body cut where it breaks, each piece opened by its
    head (:func:`indexed_parts`; the embedder's ``chunk``), and for a long tool output or pasted log one
    more, of its head and the lines that say what went wrong (:func:`error_lines`), so that a question
    about the failure meets them without the boilerplate around them. At most :data:`MAX_CHUNKS`.

    An embedder whose ``chunk`` takes no ``head`` (a plug-in's ``chunk(text)``) cuts the whole text.
    """
    head, body = indexed_parts(m, call)
    if not body:
        return [head]
    chunker = getattr(embedder, "chunk", None)
    headed = chunker is not None and _takes_head(chunker)

    def cut(text: str) -> list[str]:
        if chunker is None:
            return chunk_text(text, head=head)
        return chunker(text, head=head) if headed else chunker(f"{head} {text}")

    pieces = cut(body)[:MAX_CHUNKS] or [head]
    if len(pieces) > 1 and m.role in ("tool", "user"):
        errors = error_lines(body)
        if errors:
            pieces = pieces[: MAX_CHUNKS - 1] + cut("\n".join(errors))[:1]
    return pieces


_HEADED: dict[type, bool] = {}


def _takes_head(chunker: Callable[..., Any]) -> bool:
    """Whether an embedder's ``chunk`` takes ``head`` (the bundled engines' and :class:`Embedder`'s do)."""
    owner = type(getattr(chunker, "__self__", chunker))
    if owner not in _HEADED:
        try:
            _HEADED[owner] = "head" in inspect.signature(chunker).parameters
        except (TypeError, ValueError):
            _HEADED[owner] = False
    return _HEADED[owner]


#: Characters of one message's body that go into the lexical index: its first :data:`LEXICAL_HEAD_CHARS`
#: and its last :data:`LEXICAL_TAIL_CHARS` (where a log's summary and its last error are), with the lines
#: between them that say what went wrong.
LEXICAL_HEAD_CHARS, LEXICAL_TAIL_CHARS = 200_000, 50_000


def lexical_text(
    m: Message, call: ToolCall | None = None, previous: Message | None = None,
    settings: RecallSettings = DEFAULT_RECALL,
) -> str:
    """The text the lexical index holds for a message: itself (:func:`document_text`; a tool result with
    its call's long arguments too, a commit's message, a file written), its date, the head of the turn
    before it (``settings.previous_chars``; a giant tool result would drown the message), and for a tool
    result or a user's message the lines that say what went wrong once more, so that their words weigh
    more than the boilerplate around them (:func:`error_lines`).

    A giant message is read by its start and its end, with the error lines of what lies between
    (:data:`LEXICAL_HEAD_CHARS`, :data:`LEXICAL_TAIL_CHARS`): BM25's length normalisation makes the
    words of a giant text rank near zero anyway, and tokenising megabytes in Python costs seconds.
    """
    head, body = indexed_parts(m, call)
    if m.role == "tool" and call is not None:
        head = " ".join([head, *call_parts(call)[1]])
    errors = error_lines(body) if m.role in ("tool", "user") else []
    if len(body) > LEXICAL_HEAD_CHARS + LEXICAL_TAIL_CHARS:
        body = "\n".join([body[:LEXICAL_HEAD_CHARS], *errors, body[-LEXICAL_TAIL_CHARS:]])
    text = f"{head} {body}"
    if errors:
        text += "\n" + "\n".join(errors)
    text += f" {m.created_at.day} {m.created_at:%B %Y}"
    if previous is not None:
        text += " " + document_text(previous)[:settings.previous_chars]
    return text


def by_namespace(messages: Sequence[Message]) -> dict[str, list[Message]]:
    """Messages grouped by namespace, in order (log calls that take ids act inside one namespace)."""
    groups: dict[str, list[Message]] = {}
    for m in messages:
        groups.setdefault(m.namespace, []).append(m)
    return groups


def _calls_answered(messages: Sequence[Message], log: MessageLog) -> dict[tuple[str, str, str], ToolCall]:
    """The calls that the tool results among ``messages`` answer, keyed (namespace, session, call id)."""
    call_of: dict[tuple[str, str, str], ToolCall] = {}
    for ns, group in by_namespace([m for m in messages if m.role == "tool"]).items():
        owners = set(log.units.ids_of(ns, [m.id for m in group]).values())
        for owner in log.get_many(ns, owners).values():
            for c in owner.tool_calls:
                call_of[(owner.namespace, owner.session, c.id)] = c
    for m in messages:
        for c in m.tool_calls:
            call_of[(m.namespace, m.session, c.id)] = c
    return call_of


def lexical_rows(
    messages: Sequence[Message], log: MessageLog, call_of: dict[tuple[str, str, str], ToolCall] | None = None,
    settings: RecallSettings = DEFAULT_RECALL,
) -> list[tuple[str, str, str]]:
    """Rows for the lexical index: (message id, scope terms, body terms).

    The rows do not carry the namespace: write them with ``log.lexical.put_lexical(namespace, rows)``
    (or ``log.lexical.mark_indexed``) per namespace (see :func:`by_namespace`).
    """
    if call_of is None:
        call_of = _calls_answered(messages, log)
    by_seq = {(m.namespace, m.session, m.seq): m for m in messages}
    rows = []
    for m in messages:
        prev = by_seq.get((m.namespace, m.session, m.seq - 1))
        if prev is None and m.seq > 0:
            before = log.messages(m.namespace, m.session, after_seq=m.seq - 2, limit=1)
            prev = before[0] if before and before[0].seq < m.seq else None
        call = call_of.get((m.namespace, m.session, m.tool_call_id or ""))
        body = " ".join(lexical.tokenize(lexical_text(m, call, prev, settings)))
        rows.append((m.id, lexical.scope_text(m.namespace, m.session), body))
    return rows


def scalar_metadata(meta: dict[str, Any]) -> dict[str, Any]:
    """User metadata that Chroma can filter on: scalar values, keys prefixed ``m_`` (see ``RowFilter.chroma``)."""
    out = {}
    for k, v in meta.items():
        if isinstance(v, (str, int, float, bool)):
            out[META_PREFIX + k] = v
    return out


def chunk_metadata(m: Message, unit_id: str, chunk: int) -> dict[str, Any]:
    return {
        "message_id": m.id,
        "unit_id": unit_id,
        "session": m.session,
        "role": m.role,
        "seq": m.seq,
        "created_at": m.created_at.timestamp(),
        "chunk": chunk,
        **scalar_metadata(dict(m.metadata)),
    }


def index_messages(
    messages: Sequence[Message], *, log: MessageLog, index: Index, embedder: Embedder,
    settings: RecallSettings = DEFAULT_RECALL, mark: bool = True, counter: TokenCounter | None = None,
    progress: Callable[[float], None] | None = None,
) -> int:
    """Embed and index stored messages (any mix of sessions of one store), then mark them indexed.

    Idempotent: chunks are upserted under stable ids, so running it twice on
    the same messages (after a crash, say) leaves one copy. Returns the number
    of chunks written. Messages of several namespaces are indexed one
    namespace at a time (ids are unique per namespace only). ``mark=False`` writes the vectors only
    (a reindex's next generation, which the log's flags and lexical rows do not describe yet).
    With ``counter`` (the one the log keeps counts by), what each message costs
    in a prompt is counted here, while the last upsert runs, and kept with it, so
    assembly never counts a stored message (``log.lexical.mark_indexed(tokens=...)``).
    ``progress`` is called with the share of the texts embedded so far (after each block), so that a
    progress bar moves within one call.
    """
    if not messages:
        return 0
    groups = by_namespace(messages)
    if len(groups) > 1:
        return sum(index_messages(g, log=log, index=index, embedder=embedder, settings=settings, mark=mark,
                                  counter=counter, progress=progress)
                   for g in groups.values())
    namespace = messages[0].namespace
    units = log.units.ids_of(namespace, [m.id for m in messages])
    # the calls tool results answer, so their text can carry the call's name and arguments
    call_of = _calls_answered(messages, log)
    texts: list[str] = []
    rows: list[tuple[Message, int]] = []
    n_chunks: dict[str, int] = {}
    for m in messages:
        call = call_of.get((m.namespace, m.session, m.tool_call_id or ""))
        pieces = chunks_of(m, call, embedder)
        n_chunks[m.id] = len(pieces)
        for i, piece in enumerate(pieces):
            texts.append(piece)
            rows.append((m, i))
    # Embed in blocks of similar length (less padding) and hand each block's upsert to a writer thread:
    # Chroma's upsert releases the GIL, so it runs while the next block embeds.
    order = sorted(range(len(texts)), key=lambda j: len(texts[j]))
    blocks = [order[start : start + EMBED_BLOCK] for start in range(0, len(order), EMBED_BLOCK)]
    lex: list[tuple[str, str, str]] = []
    tokens: dict[str, int] | None = None

    def count() -> dict[str, int] | None:
        return {m.id: count_message(counter, m.to_openai()) for m in messages} if counter is not None else None

    def embedded(block: list[int]) -> tuple[list[list[float]], str | None]:
        vectors = _embed(embedder, texts, block)
        if progress is not None:
            done[0] += len(block)
            progress(done[0] / len(texts))
        return vectors

    done = [0]
    if len(blocks) == 1:
        _upsert_block(index, blocks[0], rows, units, embedded(blocks[0]))
        if mark:
            lex, tokens = lexical_rows(messages, log, call_of, settings), count()
    else:
        with ThreadPoolExecutor(1, thread_name_prefix="ragmem-upsert") as writer:
            pending = [writer.submit(_upsert_block, index, block, rows, units, embedded(block))
                       for block in blocks]
            if mark:  # meanwhile, the last upsert runs
                lex, tokens = lexical_rows(messages, log, call_of, settings), count()
            for f in pending:
                f.result()  # an upsert that failed raises here, before anything is marked indexed
    if mark:
        log.lexical.mark_indexed(namespace, n_chunks, lex, tokens)
    return len(texts)


#: Texts embedded per block on the bulk path (each block's upsert overlaps the next block's embedding).
EMBED_BLOCK = 256


def _embed(embedder: Embedder, texts: Sequence[str], block: Sequence[int]) -> tuple[list[list[float]], str | None]:
    """The vectors of one block of texts, with the path that computed them (for the store's record)."""
    from .embed._base import embed_texts

    vectors = embed_texts(embedder, [texts[j] for j in block], "document")
    return vectors, getattr(embedder, "precision_used", None)


def _upsert_block(index: Index, block: Sequence[int], rows: Sequence[tuple[Message, int]],
                  units: dict[str, str], embedded: tuple[list[list[float]], str | None]) -> None:
    vectors, path = embedded
    by_ns: dict[str, tuple[list, list, list]] = {}
    for j, vec in zip(block, vectors):
        m, i = rows[j]
        ids, vecs, metas = by_ns.setdefault(m.namespace, ([], [], []))
        ids.append(chunk_id(m.id, i))
        vecs.append(vec)
        meta = chunk_metadata(m, units.get(m.id, m.id), i)
        if path:
            meta["embedded_by"] = path
        metas.append(meta)
    for ns, (ids, vecs, metas) in by_ns.items():
        for start in range(0, len(ids), 1000):
            index.upsert(ns, ids[start : start + 1000], vecs[start : start + 1000], metas[start : start + 1000])
