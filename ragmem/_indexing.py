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

from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Sequence

from . import _lexical as lexical
from .embed import Embedder, chunk_text
from ._messages import Message, ToolCall, message_text
from ._settings import DEFAULT_RECALL, RecallSettings
from ._tokens import TokenCounter, count_message
from ._store import Log as MessageLog, Index
from ._store.filters import META_PREFIX
from ._store.index import chunk_id


def document_text(m: Message, call: ToolCall | None = None) -> str:
    """The text embedded for a message; a tool result names the call it answers when ``call`` is known."""
    return message_text(m, tool_head=f"tool {call.name}({call.arguments}) returned:" if call else "tool returned:")


#: Characters of one message that go into the lexical index.
LEXICAL_MAX_CHARS = 100_000
#: Chunks of one message that go into the vector index: its first 1,000 (about 220,000 tokens with the
#: bundled model, so a 1,000,000-character message of prose is embedded nearly whole). Cost follows
#: tokens, not characters: 900,000 characters of "1/" made 4,054 chunks, and one add() ran for minutes.
#: The log, exports and prompts keep the message whole; only the vectors stop at this many chunks.
MAX_CHUNKS = 1_000


def lexical_text(
    m: Message, call: ToolCall | None = None, previous: Message | None = None,
    settings: RecallSettings = DEFAULT_RECALL,
) -> str:
    """The text the lexical index holds for a message: itself, its date, and the head of the turn
    before it (``settings.previous_chars``; a giant tool result would drown the message)."""
    # BM25's length normalisation makes the words of a giant text rank near zero anyway, and tokenising
    # megabytes in Python costs seconds: the lexical index keeps a long message's head, the vector index
    # (chunked) keeps all of it searchable.
    body = document_text(m, call)[:LEXICAL_MAX_CHARS]
    text = f"{body} {m.created_at.day} {m.created_at:%B %Y}"
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
    chunker = getattr(embedder, "chunk", None) or chunk_text
    for m in messages:
        call = call_of.get((m.namespace, m.session, m.tool_call_id or ""))
        pieces = chunker(document_text(m, call))[:MAX_CHUNKS] or [""]
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
