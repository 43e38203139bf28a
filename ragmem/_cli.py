"""The ``ragmem`` command line: a thin shell over :class:`ragmem.Memory`.

Commands are nouns (``ingest``, ``search``, ``show``, ``state``, ``forget`` ...),
every one takes ``--json``, and the store folder comes from ``--store`` or the
``RAGMEM_STORE`` environment variable. ``ragmem`` itself is imported inside the
commands, never at module level, so ``ragmem --help`` and the commands that
need no embedding model start without loading torch.

Errors a user can fix (a :class:`~ragmem._errors.RagmemError`: a bad option, a
missing or malformed file, a store that cannot be opened) print one line to
stderr and exit with status 1. Anything else is a bug in ragmem: it shows its
traceback and a line asking for a report, and exits with status 2 or more.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Literal

import click

from ._assemble import STRATEGIES
from ._config import DEFAULT_STORE
from ._jsonable import json_default as _json_default, plain as _jsonable
from .importers import FORMATS as IMPORT_FORMATS

if TYPE_CHECKING:  # pragma: no cover
    from ragmem import Memory

#: Ingests with more messages than this show a progress bar (on stderr, when it is a terminal).
PROGRESS_MIN = 200
#: Imports of at least this many new messages show one (a coding agent's session of 50 turns embeds for seconds).
IMPORT_PROGRESS_MIN = 50


# ------------------------------------------------------------------ options


@dataclass
class Config:
    """A command's options, resolved: what it was given, else RAGMEM_* variables, else the store's file, else defaults."""

    store: str = DEFAULT_STORE
    namespace: str = "default"
    session: str = "default"
    json: bool = False
    log_url: str | None = None  # a shared PostgreSQL log (docs/deployment.md)
    chroma_url: str | None = None
    embedder: str | None = None  # an offline model by name (a name is data; import paths only in ragmem.toml)
    trust_config: bool | None = None  # --trust-store-config: the store's ragmem.toml may name code and servers


@dataclass
class _GroupOptions:
    """The options given before the command (``ragmem --namespace X search``); None where left unset."""

    store: str = DEFAULT_STORE
    namespace: str | None = None  # None is unset; "default" given is a value, and beats the environment and the file
    session: str | None = None
    json: bool = False
    log_url: str | None = None
    chroma_url: str | None = None
    embedder: str | None = None
    trust_config: bool | None = None


def _common(fn: Callable) -> Callable:
    """Add --store/--namespace/--session/--json to a command, so they work after it too."""
    for opt in reversed(_COMMON_OPTIONS):
        fn = opt(fn)
    return fn


_COMMON_OPTIONS = [
    click.option(
        "--store",
        "store_",
        metavar="PATH",
        default=None,
        help=f"Store folder [env RAGMEM_STORE; default {DEFAULT_STORE}].",
    ),
    click.option("--namespace", "namespace_", metavar="NAME", default=None, help="Namespace (user, agent or tenant)."),
    click.option("--session", "session_", metavar="NAME", default=None, help="Session within the namespace."),
    click.option("--json", "json_", is_flag=True, default=None, help="Print machine-readable JSON."),
]


def _cfg(store_: str | None, namespace_: str | None, session_: str | None, json_: bool | None) -> Config:
    """Merge a command's own options over the group's (``ragmem --store X search ...``)."""
    from . import _validate as validate

    from ragmem._config import load_config

    base: _GroupOptions = click.get_current_context().find_object(_GroupOptions) or _GroupOptions()
    store = base.store if store_ is None else store_
    validate.store_path(store)  # `--store ''` is a mistake, not the cwd
    # RAGMEM_* variables and the store's ragmem.toml fill what no option gave ("default" given is kept)
    namespace, session = load_config(store, trust=base.trust_config).scope(
        base.namespace if namespace_ is None else namespace_, base.session if session_ is None else session_)
    return Config(store=store, namespace=namespace, session=session, json=bool(json_) or base.json,
                  log_url=base.log_url, chroma_url=base.chroma_url, embedder=base.embedder,
                  trust_config=base.trust_config)


def _open(cfg: Config, **kw: Any) -> "Memory":
    from ragmem import Memory  # lazy: keeps --help and model-free commands fast

    if cfg.embedder is not None:
        kw.setdefault("embedder", cfg.embedder)
    return Memory(cfg.store, session=cfg.session, namespace=cfg.namespace, log_url=cfg.log_url,
                  chroma_url=cfg.chroma_url, trust_config=cfg.trust_config, **kw)


_MAX_CHARS = click.option(
    "--max-chars", type=click.IntRange(1), default=None, metavar="N",
    help="Longest message to accept, in characters, as Memory(max_chars=N) [default: 1,000,000].")


def _max_chars(n: int | None) -> dict[str, int]:
    return {"max_chars": n} if n is not None else {}


def _emit(cfg: Config, data: Any, human: Callable[[], Iterable[str]] | str | None = None) -> None:
    """Print ``data`` as JSON under --json, else the human lines."""
    if cfg.json:
        click.echo(json.dumps(data, ensure_ascii=False, indent=2, default=_json_default))
        return
    if human is None:
        return
    lines = [human] if isinstance(human, str) else human()
    for line in lines:
        click.echo(line)


#: The help of --asked-at (search and prompt).
ASKED_AT_HELP = ("When the question is asked [default: now]: a period it names (\"last month\", \"two weeks ago\") is "
                 "read from WHEN and searched again (ISO date/time, or an age: 3d). See docs/recall.md.")


def _when(value: str | None, option: str) -> datetime | None:
    """Parse --since/--until with the library's one parser: ISO date or time, or an age like 90m, 12h, 7d, 2w."""
    from . import _validate as validate

    return validate.when(value, option)


def _require_session(mem: Memory, name: str, *, search: bool = False) -> None:
    """Refuse a session that does not exist, on stderr with exit status 1, instead of an empty answer.

    The refusal is every door's (:func:`ragmem._doors.require_session`): its hint lists only this namespace's
    sessions, never another namespace's names.
    """
    from ._doors import require_session

    require_session(mem, name, search=search)


def _short(text: str, width: int = 100) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _middle(text: str, width: int) -> str:
    """``text`` on one line, cut in the middle when longer than ``width``: a path keeps its file name
    (``/home/me/…/site/script.js`` and ``…/site/styles.css`` stay apart)."""
    text = " ".join(text.split())
    if len(text) <= width:
        return text
    tail = (width - 1) // 2
    return text[: width - 1 - tail] + "…" + text[len(text) - tail:]


def _args_line(arguments: str, width: int = 60) -> str:
    """A tool call's arguments on one line: ``key=value`` for a JSON object, each value cut in the middle."""
    try:
        args = json.loads(arguments)
    except ValueError:
        args = None
    if not isinstance(args, dict) or not args:
        return _middle(arguments, width)
    each = max(16, width // len(args))

    def shown(v: Any) -> str:
        text = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
        path = isinstance(v, str) and not any(ch.isspace() for ch in v) and ("/" in v or "\\" in v)
        return _middle(text, max(each, 40) if path else each)  # a path gets room for its folder and file name

    return ", ".join(f"{k}={shown(v)}" for k, v in args.items())


def _msg_line(m: Any) -> str:
    """One message as one human line: seq, time, role, text (or tool calls, their arguments cut in the middle)."""
    body = m.text if m.content is not None else ""
    if m.tool_calls:
        calls = "→ " + ", ".join(f"{c.name}({_args_line(c.arguments, max(24, 60 // len(m.tool_calls)))})"
                                 for c in m.tool_calls)
        body = (_short(body, max(20, 99 - len(calls))) + " " if body.strip() else "") + calls
    else:
        body = _short(body)
    if m.role == "tool":
        body = f"[{m.tool_call_id}] {body}"
    who = m.role + (f":{m.name}" if m.name else "")
    return f"{m.seq:>5}  {m.created_at:%Y-%m-%d %H:%M}  {who:<10} {body}  ({m.id})"


def _call_lines(c: Any) -> Iterator[str]:
    """A tool call in full, its arguments one a line and a text argument's own lines as lines (a file written
    whole reads as the file, not as one line of ``\\n`` escapes)."""
    try:
        args = json.loads(c.arguments)
    except ValueError:
        args = None
    if not isinstance(args, dict):
        yield f"tool call:  {c.id} {c.name}({c.arguments})"
        return
    yield f"tool call:  {c.id} {c.name}"
    for k, v in args.items():
        if isinstance(v, str) and "\n" in v:
            yield f"  {k}:"
            for line in v.splitlines():
                yield f"    {line}"
        else:
            yield f"  {k}: {v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)}"


# ------------------------------------------------------------------ the group


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option(
    "--store",
    envvar="RAGMEM_STORE",
    default=DEFAULT_STORE,
    show_default=True,
    metavar="PATH",
    help="Store folder (env RAGMEM_STORE).",
)
@click.option("--namespace", metavar="NAME",
              help="Namespace (user, agent or tenant) [env RAGMEM_NAMESPACE, else the store's ragmem.toml; default: default].")
@click.option("--session", metavar="NAME",
              help="Session within the namespace [env RAGMEM_SESSION, else the store's ragmem.toml; default: default].")
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
@click.option("--log-url", envvar="RAGMEM_LOG_URL", metavar="URL",
              help="postgresql:// URL of a log shared by several hosts (env RAGMEM_LOG_URL; docs/deployment.md).")
@click.option("--chroma-url", envvar="RAGMEM_CHROMA_URL", metavar="URL",
              help="URL of a Chroma server for the vectors (env RAGMEM_CHROMA_URL).")
@click.option("--embedder", metavar="NAME", default=None,
              help="Embedding model by name: all-MiniLM-L6-v2 or multilingual-e5-small [default: the store's own; "
                   "a new store: the default model]. A store keeps the model it was built with (`ragmem reindex`).")
@click.option("--trust-store-config", "trust", is_flag=True, default=None,
              help="Let the store's ragmem.toml name import paths and servers (env RAGMEM_TRUST_STORE_CONFIG=1); "
              "without it they are refused. See docs/storage.md.")
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=lambda c, p, v: _version(c, v),
              help="Show the version and exit.")
@click.pass_context
def cli(
    ctx: click.Context, store: str, namespace: str | None, session: str | None, as_json: bool, log_url: str | None,
    chroma_url: str | None, embedder: str | None, trust: bool | None,
) -> None:
    """ragmem: retrieval-augmented memory over LLM conversation history.

    Every message goes into a Chroma collection; `ragmem prompt` assembles a
    token-budgeted prompt that never splits a tool call from its result.
    Options given here apply to every command and may also follow the command.
    """
    if embedder is not None:  # checked here, before any store is opened: an unknown name lists the offline ones
        from ragmem.embed._models import bundled_model

        embedder = bundled_model(embedder).name
    ctx.obj = _GroupOptions(store=store, namespace=namespace, session=session, json=as_json, log_url=log_url,
                            chroma_url=chroma_url, embedder=embedder, trust_config=trust)


def _version(ctx: click.Context, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        from ragmem import __version__

        click.echo(f"ragmem {__version__}")
        ctx.exit()


# ------------------------------------------------------------------ ingest


@cli.command()
@click.argument("file", metavar="FILE")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["auto", "openai", "anthropic", "locomo"]),
    default="auto",
    show_default=True,
    help="Input format; auto detects Anthropic blocks and LoCoMo conversations.",
)
@click.option("--progress/--no-progress", default=None, help="Force the progress bar on or off (default: on for long ingests on a terminal).")
@_MAX_CHARS
@_common
def ingest(file: str, fmt: str, progress: bool | None, max_chars: int | None, **opts: Any) -> None:
    """Add the messages of a JSON or JSONL file to the session.

    FILE may be '-' to read stdin. The whole file is checked before anything
    is stored: a bad line stores nothing and the error names the line.
    Messages without an id get one derived from their content, so ingesting
    a file again (or a fixed one after an error) stores no duplicates.

    \b
    Accepted shapes:
      - JSONL, one OpenAI chat message per line;
      - JSONL, one {"messages": [...]} conversation per line (fine-tuning files);
      - JSON, a list of messages, or {"messages": [...], "system": "..."};
      - Anthropic Messages format (tool_use / tool_result blocks), with --format anthropic or detected;
      - a LoCoMo conversation (speaker_a, speaker_b, session_N ...), one ragmem
        session per conversation (named by --session, or the sample id).
    """
    from ragmem._errors import InvalidMessage
    from ragmem._loaders import content_ids, load_history, relabel

    cfg = _cfg(**opts)
    conversations = load_history(file, fmt, default_session=cfg.session)
    # background indexing: add_many() then only writes the log (one transaction per session, so a
    # session is stored whole or not at all), and the bar follows the embedding behind it
    root = _open(cfg, index="background", **_max_chars(max_chars))
    try:
        plans = []
        for conv in conversations:  # validate every message of every session before storing any
            session = conv.session or cfg.session
            msgs = content_ids(conv.messages, namespace=cfg.namespace, session=session, max_chars=root.settings.max_chars,
                               clip_tool_results=root.settings.clip_tool_results, origins=conv.origins)
            plans.append((session, msgs, conv.origins))
        stored: dict[str, int] = {}
        base = root.store.progress.indexed  # what the opening's repair indexed is not this ingest's
        for session, msgs, origins in plans:
            mem = root if session == cfg.session else root.for_session(session)
            try:
                stored[session] = len(mem.add_many(msgs, format="openai"))
            except InvalidMessage as exc:
                raise exc.reworded(relabel(exc, origins)) from None
        total = sum(stored.values())
        show = progress if progress is not None else (total > PROGRESS_MIN and sys.stderr.isatty())
        if show:
            with _progress(total, "ingesting") as bar:
                follow_indexing(root.store, total, base, bar)
        root.store.flush()  # what the worker could not index is indexed here, or its error raised
    finally:
        root.close()
    n_in = sum(len(m) for _, m, _ in plans)
    names = list(stored)
    data = {"messages": total, "already_stored": n_in - total, "sessions": names, "namespace": cfg.namespace,
            "store": cfg.store}

    def human() -> Iterator[str]:
        where = ", ".join(repr(n) for n in names)
        again = f" ({n_in - total} were already stored)" if n_in - total else ""
        yield (f"ingested {total} messages into session{'s' if len(names) > 1 else ''} {where} of namespace "
               f"{cfg.namespace!r} in {cfg.store}{again}")
        if names and names != [cfg.session]:
            yield f"search it with: ragmem search QUERY --session {names[0]}" + (
                " (or --all-sessions)" if len(names) > 1 else "")

    _emit(cfg, data, human)


def follow_indexing(store: Any, total: int, base: int, bar: Any, *, every: float = 0.1) -> None:
    """Advance ``bar`` to the ``total`` messages the background indexer of ``store`` is embedding, with their rate.

    It reads :attr:`Store.progress <ragmem._store.store.Store.progress>` (no query: the bar costs the ingest
    nothing it can measure), which moves within each batch as its blocks are embedded. ``base`` is what the
    progress said before these messages were stored. It returns once they are indexed, or when the indexer
    fails (the store is flagged behind) or stops moving; the caller's ``flush()`` then says why.
    """
    import time

    started = last_change = time.monotonic()
    shown = 0
    while True:
        now_at = store.progress
        reached = min(total, int(now_at.messages) - base)
        if reached > shown:
            elapsed = time.monotonic() - started
            bar.update(reached - shown, f"{reached / elapsed:,.0f} msg/s" if elapsed > 0 else "")
            shown, last_change = reached, time.monotonic()
        stuck = time.monotonic() - last_change > 300
        if now_at.indexed - base >= total or store.index_behind or stuck:
            return
        time.sleep(every)


def _progress(total: int, label: str = "indexing") -> Any:
    """The bar of a long ingest or import on stderr: position, rate (what :func:`follow_indexing` passes) and ETA."""
    return click.progressbar(length=total, label=label, file=sys.stderr, show_pos=True, show_eta=True,
                             item_show_func=lambda rate: rate)


# ------------------------------------------------------------------ search


@cli.command()
@click.argument("query")
@click.option("-k", "k", type=click.IntRange(1, 1000), default=10, show_default=True, help="Number of hits.")
@click.option("--role", type=click.Choice(["system", "user", "assistant", "tool"]), help="Only messages with this role.")
@click.option("--since", metavar="WHEN", help="Only messages at or after WHEN (ISO date/time, or an age: 12h, 7d).")
@click.option("--until", metavar="WHEN", help="Only messages before WHEN (same forms as --since).")
@click.option("--all-sessions", is_flag=True, help="Search every session of the namespace, not just --session.")
@click.option("--min-score", type=click.FloatRange(-1, 1), default=None, metavar="SCORE",
              help="Only hits whose cosine similarity to QUERY reaches SCORE (0.3 keeps clear matches; see docs/recall.md).")
@click.option("--asked-at", metavar="WHEN", help=ASKED_AT_HELP)
@_common
def search(query: str, k: int, role: str | None, since: str | None, until: str | None, all_sessions: bool,
           min_score: float | None, asked_at: str | None, **opts: Any) -> None:
    """Search the history semantically for QUERY, best hits first."""
    cfg = _cfg(**opts)
    lo, hi, asked = _when(since, "--since"), _when(until, "--until"), _when(asked_at, "--asked-at")
    mem = _open(cfg, create=False)
    try:
        if not all_sessions:
            _require_session(mem, cfg.session, search=True)
        hits = mem.search(query, k=k, role=role, since=lo, until=hi, min_score=min_score,
                          scope="namespace" if all_sessions else "session", asked_at=asked)
    finally:
        mem.close()
    data = [{"score": h.score, "similarity": h.similarity, "session": h.session, "message": h.message.to_record()}
            for h in hits]

    def human() -> Iterator[str]:
        if not hits:
            yield "no matches" + (f" with a similarity of {min_score} or more" if min_score is not None else "")
            return
        yield ("score   sim  (score ranks this query's hits; sim, the cosine similarity, is what --min-score filters; "
               "'-': found by its exact words, not by meaning)")
        for h in hits:
            where = f"{h.session} " if all_sessions else ""
            sim = f"{h.similarity:5.2f}" if h.similarity is not None else "    -"
            yield f"{h.score:5.2f} {sim}  {where}{_msg_line(h.message)}"

    _emit(cfg, data, human)


# ------------------------------------------------------------------ show


@cli.group()
def show() -> None:
    """Show a session's messages, or one message."""


@show.command("session")
@click.argument("name", required=False)
@click.option("--limit", type=click.IntRange(1), help="Only the last N messages.")
@_common
def show_session(name: str | None, limit: int | None, **opts: Any) -> None:
    """Print the messages of session NAME (default: --session) in order."""
    cfg = _cfg(**opts)
    mem = _open(cfg, create=False)
    try:
        _require_session(mem, name or cfg.session)
        msgs = mem.messages(name or cfg.session)
    finally:
        mem.close()
    if limit:
        msgs = msgs[-limit:]
    _emit(cfg, [m.to_record() for m in msgs], lambda: (_msg_line(m) for m in msgs) if msgs else iter(["(empty session)"]))


@show.command("message")
@click.argument("message_id", metavar="ID")
@_common
def show_message(message_id: str, **opts: Any) -> None:
    """Print one message by ID, in full."""
    cfg = _cfg(**opts)
    mem = _open(cfg, create=False)
    try:
        m = mem.get(message_id)
    finally:
        mem.close()
    rec = m.to_record()

    def human() -> Iterator[str]:
        yield f"id:         {m.id}"
        yield f"session:    {m.namespace}/{m.session}  seq {m.seq}"
        yield f"role:       {m.role}" + (f"  name {m.name}" if m.name else "")
        yield f"created_at: {m.created_at.isoformat()}"
        if m.tool_call_id:
            yield f"answers:    {m.tool_call_id}"
        for c in m.tool_calls:
            yield from _call_lines(c)
        if m.metadata:
            yield f"metadata:   {json.dumps(dict(m.metadata), ensure_ascii=False)}"
        if m.content is not None:
            yield ""
            yield m.content if isinstance(m.content, str) else json.dumps(m.content, ensure_ascii=False, indent=2)

    _emit(cfg, rec, human)


# ------------------------------------------------------------------ export / import


@cli.command("export")
@click.option("-o", "--output", metavar="FILE", help="Write to FILE instead of stdout.")
@_common
def export_(output: str | None, **opts: Any) -> None:
    """Export the session as lossless JSONL records.

    The records (id, role, content, tool_calls, tool_call_id, name, created_at,
    metadata, seq) restore exactly with `ragmem import`. With --json, one JSON
    array instead of JSONL.
    """
    cfg = _cfg(**opts)
    mem = _open(cfg, create=False)
    try:
        _require_session(mem, cfg.session)
        records = mem.export(cfg.session)
    finally:
        mem.close()
    if cfg.json:
        text = json.dumps(records, ensure_ascii=False, indent=2, default=_json_default) + "\n"
    else:
        text = "".join(json.dumps(r, ensure_ascii=False, default=_json_default) + "\n" for r in records)
    if output:
        try:
            Path(output).write_text(text, encoding="utf-8")
        except OSError as exc:  # the user's path: say which and why, as for an input file
            from ragmem._errors import UsageError

            raise UsageError(f"{output}: cannot write ({exc.strerror}); pass a writable path to --output") from None
        click.echo(f"exported {len(records)} messages to {output}", err=True)
    else:
        click.echo(text, nl=False)


@cli.command("import")
@click.argument("file", metavar="FILE")
@_common
def import_(file: str, **opts: Any) -> None:
    """Restore records written by `ragmem export`.

    FILE is JSONL or a JSON array; '-' reads stdin. Records keep their ids, times and metadata; ids already in the store are skipped.
    """
    cfg = _cfg(**opts)
    from ragmem._errors import InvalidMessage
    from ragmem._loaders import parse_json_or_jsonl, read_text

    text = read_text(file)
    if not text.strip():
        raise InvalidMessage(f"{file}: the file is empty; pass a file written by `ragmem export`")
    records = parse_json_or_jsonl(text, file)
    if isinstance(records, dict):
        records = [records]
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise InvalidMessage(f"{file}: expected export records, one JSON object per line (what `ragmem export` writes)")
    mem = _open(cfg)
    try:
        n = mem.import_records(records)
    finally:
        mem.close()
    _emit(cfg, {"imported": n, "records": len(records)}, f"imported {n} of {len(records)} records")


@cli.command("import-chats")
@click.argument("paths", nargs=-1, metavar="[PATH]...")
@click.option("--from", "fmt", type=click.Choice(IMPORT_FORMATS), default=None,
              help="The files' format [default: detected per file]. With no PATH, reads that agent's own folder "
                   "(~/.claude/projects, ~/.codex/sessions, ~/.gemini/tmp).")
@click.option("--follow", is_flag=True, help="Keep importing as the files grow (Ctrl-C stops); see docs/importers.md.")
@click.option("--interval", type=click.FloatRange(0.05), default=1.0, show_default=True, metavar="SECONDS",
              help="With --follow: how often to look for growth.")
@click.option("--skip-bad-lines", is_flag=True,
              help="Import the rest of a transcript with malformed lines (counted) instead of refusing the file.")
@_MAX_CHARS
@_common
def import_chats(paths: tuple[str, ...], fmt: str | None, follow: bool, interval: float, skip_bad_lines: bool,
                 max_chars: int | None, **opts: Any) -> None:
    """Import coding agents' transcripts and chat exports: one session per agent session or conversation.

    PATH is a file, a folder (walked) or a zip. Reads Claude Code, Codex CLI
    and Gemini CLI sessions and ChatGPT and Claude.ai exports (conversations.json),
    each file's format detected. Every tool call is stored with its result;
    what is left out is counted by kind. Ids come from the files, so importing
    again stores only what is new, and a grown transcript is read on from where
    the last import stopped. A malformed file stores nothing and is refused,
    named with its line; the other files are imported, and the command then
    exits with status 1. Sessions land in --namespace (docs/importers.md).
    """
    from ragmem import _importing

    cfg = _cfg(**opts)
    targets = list(paths) or _importing.default_paths(fmt)
    _importing.check_paths(targets)  # before the store is opened: a mistyped path creates nothing
    # stored in the log first, then indexed in the background, with the bar following the indexer (as ingest)
    mem = _open(cfg, **({} if follow else {"index": "background"}), **_max_chars(max_chars))
    try:
        if follow:
            if not cfg.json:
                click.echo(f"following {', '.join(targets)} into namespace {cfg.namespace} (Ctrl-C stops)", err=True)

            def shown(result: Any) -> None:  # what each read stored, as it comes; the summary is follow's report
                if not cfg.json:
                    for name, n in result.stored.items():
                        if n:
                            click.echo(f"{n:6d}  {name}")
                    for w in result.warnings:
                        click.echo(f"warning: {w}", err=True)
            with _StopAsked() as asked:
                report = _importing.follow(mem, targets, fmt, skip_bad_lines=skip_bad_lines, interval=interval,
                                           on_file=shown, should_stop=asked.is_set)
        else:
            base = mem.store.progress.indexed  # what the opening's repair indexed is not this import's
            report = _importing.import_paths(mem, targets, fmt, skip_bad_lines=skip_bad_lines)
            total = report.stored
            if total >= IMPORT_PROGRESS_MIN and sys.stderr.isatty() and not cfg.json:
                with _progress(total, "importing") as bar:
                    follow_indexing(mem.store, total, base, bar)
            mem.store.flush()  # what the worker could not index is indexed here, or its error raised
    finally:
        mem.close()
    failure = report.failure()
    if failure is None or report.files or cfg.json:  # a lone refused file: its error says it all
        _emit(cfg, report.to_dict(), lambda: _importing.summary_lines(report, cfg.namespace, warnings_shown=follow))
    if failure is not None:
        from ragmem._errors import InvalidMessage

        raise InvalidMessage(failure)


class _StopAsked:
    """Ctrl-C (SIGINT) or SIGTERM asks a long loop to stop at its next safe point, instead of raising inside it.

    A KeyboardInterrupt raised wherever the main thread happens to be (inside
    Chroma's write, the embedder, a lock held by the store) can leave a lock
    taken, and the close that follows then waits on it forever: a follower
    that never exits. Here the first signal only sets a flag that the loop
    checks between files and while it waits; a second one raises at once
    (the user insists; nothing is lost either way, as after a kill -9).
    """

    def __init__(self) -> None:
        self._asked = False
        self._before: dict[int, Any] = {}

    def is_set(self) -> bool:
        """True once a stop was asked for."""
        return self._asked

    def _handle(self, signum: int, frame: Any) -> None:
        if self._asked:
            raise KeyboardInterrupt
        self._asked = True
        click.echo("stopping once this file is stored (Ctrl-C again to stop at once)", err=True)

    def __enter__(self) -> "_StopAsked":
        import signal
        import threading

        if threading.current_thread() is threading.main_thread():  # signal handlers belong to the main thread
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._before[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: Any) -> None:
        import signal

        for sig, before in self._before.items():
            signal.signal(sig, before)


# ------------------------------------------------------------------ prompt


class _Tokens(click.ParamType):
    """A number of tokens as people write it: 2000, 2,000, 2_000 or 2k (a thousand tokens: 1.5k is 1500)."""

    name = "TOKENS"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        text = str(value).strip().lower().replace(",", "").replace("_", "")
        try:
            n = float(text[:-1]) * 1000 if text.endswith("k") else float(text)
        except ValueError:
            n = -1.0
        if not 1 <= n <= 10_000_000 or n != int(n):  # validate.MAX_BUDGET; NaN and inf fail the range
            self.fail(f"{value!r} is not a number of tokens; write a whole number from 1 to 10,000,000: "
                      "2000, 2,000 or 2k", param, ctx)
        return int(n)


@cli.command()
@click.argument("turn")
@click.option("--budget", type=_Tokens(), default=4000, show_default=True, metavar="TOKENS",
              help="Token budget for the whole prompt: 4000, 4,000 or 4k.")
@click.option("--system", "system_", metavar="TEXT", help="System prompt.")
@click.option("--format", "fmt", type=click.Choice(["openai", "anthropic"]), default="openai", show_default=True)
@click.option(
    "--strategy",
    type=click.Choice(list(STRATEGIES)),
    default="ragmem",
    show_default=True,
    help="Assembly strategy (the others are baselines).",
)
@click.option("-k", "k", type=click.IntRange(0), default=None,
              help="Most recalled units [default: as Memory.prompt: 20, or one per 100 tokens of a larger budget].")
@click.option("--asked-at", metavar="WHEN", help=ASKED_AT_HELP)
@_common
def prompt(turn: str, budget: int, system_: str | None, fmt: Literal["openai", "anthropic"], strategy: str, k: int | None,
           asked_at: str | None, **opts: Any) -> None:
    """Assemble and print the prompt for a user TURN, with its trace.

    The prompt fits --budget tokens (tiktoken, message overhead included) and
    never splits a tool call from its result. The turn is not stored.
    """
    cfg = _cfg(**opts)
    asked = _when(asked_at, "--asked-at")
    mem = _open(cfg, create=False)
    try:
        _require_session(mem, cfg.session)
        ctx = mem.prompt(turn, system=system_, budget=budget, format=fmt, strategy=strategy, k=k, asked_at=asked)
        # each traced unit's first words, for the human trace (the JSON has the ids; `ragmem show message`)
        ids = [i for part in (ctx.trace.included, ctx.trace.dropped) for u in part for i in u.message_ids]
        found = mem.store.log.get_many(mem.namespace, ids) if ids and not cfg.json else {}
        texts = {i: m.text or "; ".join(f"{c.name}({c.arguments})" for c in m.tool_calls) for i, m in found.items()}
    finally:
        mem.close()
    data = _jsonable(ctx.to_dict())
    if data.get("system") is None:
        data.pop("system", None)

    def human() -> Iterator[str]:
        if data.get("system"):
            yield f"--- system\n{data['system']}"
        for m in ctx.messages:
            yield f"--- {m.get('role')}" + (f" ({m['tool_call_id']})" if m.get("tool_call_id") else "")
            content = m.get("content")
            if content is not None:
                yield content if isinstance(content, str) else json.dumps(content, ensure_ascii=False, indent=2)
            for c in m.get("tool_calls") or []:
                yield f"→ {c['id']} {c['function']['name']}({c['function']['arguments']})"
        yield "=== trace"
        yield ctx.trace.render(texts)

    _emit(cfg, data, human)


# ------------------------------------------------------------------ state


@cli.group()
def state() -> None:
    """Read and change the pinned state.

    The pinned state (goals, preferences, key facts) travels uncompressed with
    every prompt of the session.
    """


@state.command("get")
@click.argument("key", required=False)
@_common
def state_get(key: str | None, **opts: Any) -> None:
    """Print the pinned state, or one KEY of it."""
    cfg = _cfg(**opts)
    mem = _open(cfg, create=False)
    try:
        _require_session(mem, cfg.session)
        current = mem.state.get()
    finally:
        mem.close()
    if key is not None:
        if key not in current:
            from ragmem._errors import UsageError

            raise UsageError(f"no key {key!r} in the pinned state of {cfg.namespace}/{cfg.session}; "
                             "`ragmem state get` shows the keys it holds")
        value = current[key]
        _emit(cfg, value, value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))
        return
    _emit(cfg, current, lambda: [json.dumps(current, ensure_ascii=False, indent=2)])


@state.command("set")
@click.argument("pairs", nargs=-1, metavar="KEY=VALUE...")
@click.option("--replace", is_flag=True, help="Replace the whole state instead of updating keys.")
@click.option("--from-json", "from_json", metavar="OBJECT", help="Take the keys from a JSON object ('-' reads stdin).")
@_common
def state_set(pairs: tuple[str, ...], replace: bool, from_json: str | None, **opts: Any) -> None:
    """Set keys of the pinned state: `ragmem state set goal="fix login" retries=3`.

    A VALUE that parses as JSON (numbers, true, lists, objects) is stored as
    that; anything else is stored as a string.
    """
    from ragmem._errors import UsageError

    cfg = _cfg(**opts)
    updates: dict[str, Any] = {}
    if from_json is not None:
        raw = sys.stdin.read() if from_json == "-" else from_json
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise UsageError(f"--from-json is not valid JSON ({exc.msg}); pass an object such as '{{\"goal\": \"x\"}}'") from None
        if not isinstance(obj, dict):
            raise UsageError(f"--from-json must be a JSON object, got {type(obj).__name__}; wrap the keys in {{...}}")
        updates.update(obj)
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"{pair!r} is not KEY=VALUE; write it as goal=\"fix login\"")
        try:
            updates[key] = json.loads(value)
        except json.JSONDecodeError:
            updates[key] = value
    if not updates and not replace:
        raise UsageError("nothing to set; pass KEY=VALUE pairs or --from-json")
    mem = _open(cfg)
    try:
        if replace:
            mem.state.set(updates)
        else:
            mem.state.update(**updates)
        current = mem.state.get()
    finally:
        mem.close()
    _emit(cfg, current, lambda: [json.dumps(current, ensure_ascii=False, indent=2)])


@state.command("clear")
@_common
def state_clear(**opts: Any) -> None:
    """Empty the pinned state."""
    cfg = _cfg(**opts)
    mem = _open(cfg)
    try:
        mem.state.clear()
    finally:
        mem.close()
    _emit(cfg, {}, f"cleared the pinned state of {cfg.namespace}/{cfg.session}")


# ------------------------------------------------------------------ sessions


@cli.command()
@_common
def sessions(**opts: Any) -> None:
    """List the namespace's sessions with their stats (and, for imported agent sessions, the agent, its version,
    the model, the project and the git branch)."""
    cfg = _cfg(**opts)
    mem = _open(cfg, create=False)
    try:
        infos = mem.sessions()
        about = {s.session: _session_about(mem, s.session) for s in infos}
    finally:
        mem.close()
    data = [
        {
            "namespace": s.namespace,
            "session": s.session,
            "messages": s.messages,
            "indexed": s.indexed,
            "first_at": s.first_at.isoformat() if s.first_at else None,
            "last_at": s.last_at.isoformat() if s.last_at else None,
            **({"metadata": about[s.session]} if about[s.session] else {}),
        }
        for s in infos
    ]

    def human() -> Iterator[str]:
        if not infos:
            yield f"no sessions in {cfg.store}"
            return
        width = max(len(s.session) for s in infos)
        for s in infos:
            span = f"{s.first_at:%Y-%m-%d %H:%M} → {s.last_at:%Y-%m-%d %H:%M}" if s.first_at and s.last_at else ""
            meta = about[s.session]
            extra = "  " + " ".join(str(meta[k]) for k in _SESSION_ABOUT if k in meta and k != "undated") if meta else ""
            if meta.get("undated"):  # the file held no time for some messages: they carry the import's
                extra += "  (undated: some times are the import's, the file has none)"
            yield f"{s.session:<{width}}  {s.messages:>7} msgs  {span}{extra}"

    _emit(cfg, data, human)


#: What `ragmem sessions` shows of an imported agent session, read from its first messages' metadata
#: (``undated``: the file held no time for them, so they carry the import's).
_SESSION_ABOUT = ("agent", "agent_version", "model", "project", "git_branch", "undated")


def _session_about(mem: "Memory", session: str) -> dict[str, Any]:
    """The agent, version, model, project and branch an importer put on a session's first messages (empty for
    sessions that were not imported from an agent)."""
    found: dict[str, Any] = {}
    for m in mem.store.log.messages(mem.namespace, session, limit=10):
        if "agent" not in m.metadata:
            continue
        for k in _SESSION_ABOUT:
            if k in m.metadata and k not in found:
                found[k] = m.metadata[k]
    return found


# ------------------------------------------------------------------ forget


@cli.group()
def forget() -> None:
    """Delete a message or a whole session."""


_WAIT = click.option(
    "--wait", is_flag=True,
    help="Purge the vectors before returning (imports Chroma). By default a background process finishes it.",
)


def _purge_later(cfg: Config) -> int | None:
    """Start a detached ``ragmem purge`` that removes the forgotten vectors; its pid (None if it did not start).

    The forget itself is already durable: tombstoned messages are gone from
    every read, and the next search or prompt of any process finishes the
    purge if this one does not.
    """
    import subprocess

    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ragmem", "--store", cfg.store, "purge"],
            # the URLs travel in the environment, where a password does not show in `ps`
            env={**os.environ, **{k: v for k, v in (("RAGMEM_LOG_URL", cfg.log_url),
                                                    ("RAGMEM_CHROMA_URL", cfg.chroma_url),
                                                    ("RAGMEM_TRUST_STORE_CONFIG", "1" if cfg.trust_config else None))
                                  if v}},
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,  # outlives this command, and a Ctrl-C on the terminal does not reach it
        )
    except OSError:
        return None
    return proc.pid


def _forgot(cfg: Config, data: dict, human: str, wait: bool) -> None:
    if not wait:
        pid = _purge_later(cfg)
        data["purge"] = {"pending": True, "pid": pid}
        human += (f"; its vectors are being purged in the background (pid {pid})" if pid
                  else "; its vectors are purged by the next search (or run `ragmem purge`)")
    else:
        data["purge"] = {"pending": False}
    _emit(cfg, data, human)


@forget.command("message")
@click.argument("message_id", metavar="ID")
@_WAIT
@_common
def forget_message(message_id: str, wait: bool, **opts: Any) -> None:
    """Delete message ID (a tool exchange loses the whole unit, so no orphan is left).

    The message disappears from the log and from every read before this
    returns; its vectors are purged right after, in the background unless
    --wait is given.
    """
    cfg = _cfg(**opts)
    mem = _open(cfg)
    try:
        ids = mem.forget(message_id, wait=wait)
    finally:
        mem.close()
    extra = f" and {len(ids) - 1} more of its tool exchange" if len(ids) > 1 else ""
    _forgot(cfg, {"forgotten": ids}, f"forgot message {message_id}{extra}", wait)


@forget.command("session")
@click.argument("name")
@_WAIT
@_common
def forget_session(name: str, wait: bool, **opts: Any) -> None:
    """Delete every message, the pinned state and the summary of session NAME.

    The session disappears from the log and from every read before this
    returns; its vectors are purged right after, in the background unless
    --wait is given.
    """
    cfg = _cfg(**opts)
    mem = _open(cfg)
    try:
        _require_session(mem, name)
        n = mem.forget_session(name, wait=wait)
    finally:
        mem.close()
    _forgot(cfg, {"forgotten_session": name, "namespace": cfg.namespace, "messages": n},
            f"forgot session {cfg.namespace}/{name} ({n} messages)", wait)


@cli.command()
@_common
def purge(**opts: Any) -> None:
    """Finish pending forgets now: remove forgotten messages' vectors and log rows.

    `ragmem forget` starts this in the background; run it by hand after a
    forget whose background purge could not start. The next search or
    prompt does the same.
    """
    cfg = _cfg(**opts)
    from filelock import FileLock

    from ragmem._errors import StoreError

    # Purgers take turns: a burst of forgets starts one per forget, and the first one's pass usually
    # covers the later ones' messages, which then find nothing to do and never import Chroma.
    lock = FileLock(str(Path(cfg.store) / "purge.lock"), mode=0o600)
    try:
        lock.acquire()
    except OSError as exc:  # a read-only store folder, no permission
        raise StoreError(f"cannot take the purge lock in {cfg.store} ({exc.strerror or exc}); a purge needs the "
                         "store folder writable: run it where the store can be written") from None
    try:
        mem = _open(cfg)
        try:
            n = mem.store.finish_forgets() if mem.store.log.forgetting.any_pending() else 0
        finally:
            mem.close()
    finally:
        lock.release()
    _emit(cfg, {"purged": n}, "nothing left to purge" if not n else f"purged {n} messages")


# ------------------------------------------------------------------ reindex


@cli.command()
@click.option("--embedder", "model", metavar="NAME", default=None,
              help="The offline model to move the namespace to (all-MiniLM-L6-v2, multilingual-e5-small) "
                   "[default: the store's own, rebuilt].")
@click.option("--progress/--no-progress", default=None,
              help="Force the progress bar on or off (default: on for long reindexes on a terminal).")
@_common
def reindex(model: str | None, progress: bool | None, **opts: Any) -> None:
    """Rebuild the namespace's vectors from the log, with another embedding model if --embedder names one.

    Rebuilding with the store's own model brings vectors written by an
    older ragmem to today's chunks (pieces cut where a tool's output, a
    file or a patch breaks, each carrying its call); it costs what
    importing the namespace's messages costs, with a progress bar.

    The new vectors are built beside the live ones, so searches and prompts
    keep using the old vectors until the new ones are complete; then the
    namespace moves to them in one step and the old ones are deleted. A crash
    midway leaves the old vectors live: run the command again and it resumes,
    embedding only what is left. Moving to the model the namespace already has
    does nothing. Other namespaces keep their model.
    """
    cfg = _cfg(**opts)
    from ragmem.embed._models import bundled_model

    target = bundled_model(model).name if model else None
    mem = _open(cfg, **({"embedder": target} if target else {}))
    try:
        current = mem.store.namespace_model(cfg.namespace)
        if target is not None and current == target:
            _emit(cfg, {"namespace": cfg.namespace, "embedder": target, "reindexed": 0},
                  f"namespace {cfg.namespace!r} already uses {target}: nothing to do")
            return
        total = mem.store.log.count(cfg.namespace)
        show = progress if progress is not None else (total > PROGRESS_MIN and sys.stderr.isatty())
        if show:
            with _progress(total, "re-embedding") as bar:
                shown = [0]

                def moved(done: int, todo: int) -> None:
                    if bar.length != todo:  # what is left to embed (a resumed reindex has less)
                        bar.length = todo
                    bar.update(done - shown[0])
                    shown[0] = done

                n = mem.store.reindex(cfg.namespace, progress=moved)
        else:
            n = mem.store.reindex(cfg.namespace)
        name = mem.store.model_name
    finally:
        mem.close()
    _emit(cfg, {"namespace": cfg.namespace, "embedder": name, "previous": current, "reindexed": n},
          f"re-embedded {n} messages of namespace {cfg.namespace!r} with {name}"
          + (f" (was {current})" if current and current != name else ""))


@cli.command()
@click.option("--repair", is_flag=True, help="Rebuild what is wrong from the log (safe while the store is in use).")
@click.option("--progress/--no-progress", default=None, help="Force the progress bar on or off (default: on a terminal).")
@_common
def check(repair: bool, progress: bool | None, **opts: Any) -> None:
    """Check that the vector index holds what the log says it holds (as git fsck), and with --repair fix it.

    Every message the log flags indexed must come back with its vector from its
    session's collection and its namespace's (Chroma's metadata can list an id its
    graph lost); no collection's files may take over ten times what its vectors
    need; the index must open and read. --repair re-indexes what is lost from the
    log, rebuilds a runaway collection, and sets an unreadable index aside and
    rebuilds it. Exit status 1 when something is still wrong. The whole store is
    checked; lost ids are listed for --namespace only.
    """
    cfg = _cfg(**opts)
    mem = _open(cfg, create=False)
    bar = None
    try:
        total = sum(len(mem.store.log.lexical.indexed_chunks(ns)) for ns in mem.store.log.namespaces())
        show = progress if progress is not None else (sys.stderr.isatty() and not cfg.json and total > 2000)
        bar = _progress(total, "checking") if show else None

        def step(done: int, _total: int) -> None:
            if bar is not None:
                bar.update(done - bar.pos)

        if bar is not None:
            bar.__enter__()
        report = mem.store.check(repair=repair, progress=step)
    finally:
        if bar is not None:
            bar.__exit__(None, None, None)
        mem.close()
    data = report.as_dict()
    data["lost_ids"] = report.lost.get(cfg.namespace, [])[:100]

    def human() -> Iterator[str]:
        where = report.index + (f" (owned by pid {report.owner})" if report.owner else "")
        yield f"index: {where}; {report.checked} indexed messages checked, {report.pending} waiting to be indexed"
        if report.on_open.get("rebuilt"):
            yield (f"the open found the index damaged and rebuilt it from the log "
                   f"({report.on_open.get('indexed', 0)} messages indexed)")
        if report.repaired:
            yield "repaired: " + ", ".join(f"{k} {v}" for k, v in sorted(report.repaired.items()))
        if report.unreadable:
            yield f"UNREADABLE: {report.unreadable}; ragmem check --repair rebuilds it from the log"
        if report.lost_count:
            shown = ", ".join(data["lost_ids"][:5])
            yield (f"LOST: {report.lost_count} messages the log says are indexed have no vector in the index"
                   + (f" ({shown}...)" if shown else "") + "; ragmem check --repair indexes them again")
        for entry in report.oversized:
            yield (f"OVERSIZED: collection {entry['collection']} takes {entry['bytes_on_disk'] / 2**20:.0f} MiB on disk "
                   f"({entry['bytes'] / 2**20:.0f} MiB apparent) for {entry['count']} vectors; "
                   "ragmem check --repair rebuilds it")
        if report.ok:
            yield "ok: every indexed message is a vector the index returns"

    _emit(cfg, data, human)
    if not report.ok:
        sys.exit(1)  # as git fsck: something is still wrong


# ------------------------------------------------------------------ redact


@cli.command()
@click.option("--dry-run", is_flag=True, help="Count what would be redacted, by kind; change nothing.")
@click.option("--progress/--no-progress", default=None,
              help="Force the progress bar on or off (default: on when stderr is a terminal).")
@_common
def redact(dry_run: bool, progress: bool | None, **opts: Any) -> None:
    """Redact the secrets a store built before kept: keys, tokens, passwords and private keys.

    Every message of the namespace is redacted as adding it would have been
    (each secret becomes [redacted: KIND]); those that change are rewritten in
    the log, and their lexical rows and vectors are made anew from the new
    text. Ids, sessions, order and tool pairs stay as they were, and so does
    every message without a secret. Pinned states, running summaries and the
    import records' session metadata are redacted too. The store stays in use
    meanwhile: it goes through the store's own writes, a batch at a time. It
    works whether or not the store redacts new messages (ragmem.toml's redact).
    """
    cfg = _cfg(**opts)
    from ragmem._importing import redact_records
    from ragmem._redact import redact_store

    mem = _open(cfg, create=False)
    try:
        total = sum(s.messages for s in mem.sessions())
        show = progress if progress is not None else (sys.stderr.isatty() and not cfg.json)
        records = functools.partial(redact_records, mem.store.log, cfg.namespace)
        if show:
            with _progress(total, "redacting") as bar:
                done = redact_store(mem.store, cfg.namespace, dry_run=dry_run, progress=lambda n: bar.update(n),
                                    records=records)
        else:
            done = redact_store(mem.store, cfg.namespace, dry_run=dry_run, records=records)
    finally:
        mem.close()
    data = {"namespace": cfg.namespace, "dry_run": dry_run, **done}

    def human() -> Iterator[str]:
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(done["redacted"].items(), key=lambda kv: -kv[1]))
        verb = "would redact" if dry_run else "redacted"
        if not done["redacted"]:
            yield f"no secrets found in the {done['messages']} messages of namespace {cfg.namespace!r}"
            return
        yield (f"{verb} {sum(done['redacted'].values())} secrets ({kinds}) in {done['changed']} of "
               f"{done['messages']} messages of namespace {cfg.namespace!r}"
               + (f", {done['states']} pinned states and {done['summaries']} summaries"
                  if done["states"] or done["summaries"] else ""))
        if not dry_run:
            yield f"indexed again: {done['reindexed']} messages (the changed ones and those that carry their text)"

    _emit(cfg, data, human)


# ------------------------------------------------------------------ migrate


@cli.command()
@click.option("--to", "to", required=True, metavar="URL", help="postgresql:// URL of the log to move the store to.")
@_common
def migrate(to: str, **opts: Any) -> None:
    """Move the store's log to PostgreSQL: every session, message, state, summary and period summary.

    Sequence numbers, ids and tool pairing are kept; the vectors are rebuilt
    in the index the store is opened with afterwards (--chroma-url, or the
    embedded one). Safe to run again: what was copied is skipped. See
    docs/deployment.md.
    """
    cfg = _cfg(**opts)
    from ragmem import Memory
    from ragmem._store import open_log
    from ragmem._store.migrate import copy_log

    src = open_log(cfg.store, create=False)
    try:
        counts = copy_log(src, open_log(cfg.store, url=to))  # type: ignore[arg-type]  # no url: SQLite; a url: PostgreSQL
    finally:
        src.close()
    # opening the new store indexes what it holds (the repair on open): vectors and the lexical index
    mem = Memory(cfg.store, log_url=to, chroma_url=cfg.chroma_url, namespace=cfg.namespace)
    counts["indexed"] = mem.store.repaired.get("indexed", 0) if isinstance(mem.store.repaired, dict) else 0
    mem.close()
    _emit(cfg, counts, f"moved {counts['messages']} messages in {counts['sessions']} sessions to PostgreSQL")


# ------------------------------------------------------------------ mcp


class _McpCommand(click.Command):
    """``ragmem mcp``, whose help lists the tools as the server itself offers them (no list kept by hand)."""

    def format_help_text(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        super().format_help_text(ctx, formatter)
        from ._mcp import tool_summaries  # the SDK: imported only for this help

        with formatter.section("Tools"):
            formatter.write_dl(tool_summaries())


@cli.command(cls=_McpCommand)
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default="warning",
              show_default=True, help="The MCP SDK's logging on stderr (info: a line per request).")
@click.option("--scope", "scope", default="session", show_default=True, metavar="SCOPE",
              help="Where search_memory looks when a call names no session: session, namespace, project (the "
                   "sessions of the folder the server starts in) or project:/abs/path.")
@_common
def mcp(log_level: str, scope: str, **opts: Any) -> None:
    """Serve the store as an MCP server on stdio.

    For Claude Desktop, IDEs and agents.

    The tools, as the server lists them, follow. See docs/mcp.md for client
    configuration.
    """
    cfg = _cfg(**opts)
    from ._mcp import Scope, serve

    where = Scope.parse(scope)  # a mistaken scope refused before the server starts
    extra: dict[str, Any] = {"embedder": cfg.embedder} if cfg.embedder else {}
    serve(store=cfg.store, namespace=cfg.namespace, session=cfg.session, log_url=cfg.log_url,
          chroma_url=cfg.chroma_url, trust_config=cfg.trust_config, log_level=log_level.upper(),  # type: ignore[arg-type]
          scope=where, **extra)


# ------------------------------------------------------------------ hook


@cli.group()
def hook() -> None:
    """Hooks for coding agents: the turns compaction dropped, brought back.

    `ragmem hook claude-code` and `ragmem hook codex` read the agent's hook
    event (JSON on stdin), import the transcript's new lines and, on
    UserPromptSubmit and SessionStart (resume, compact), print what the agent
    no longer sees: this session's turns from before its last compaction and
    the other sessions of the project. A failure prints nothing, exits 0 and
    writes one line to hook.log in the store. `--install` adds the hooks to the
    agent's settings. See docs/agents.md.
    """


def _hook_command(agent: str, title: str, settings_file: str, mcp_file: str) -> Callable:
    @hook.command(agent, help=f"""The command {title} runs on its hook events (the event on stdin), or --install it.

    With --install, ragmem's hooks go into {settings_file}, your own
    settings (they name your virtualenv and store by absolute path, so never
    a file the team shares), merged with the hooks already there; the store
    is created if it does not exist; ragmem's MCP server goes into
    {mcp_file} with --scope project (a search that names no session
    searches this project's sessions; --no-mcp leaves it). Run twice, nothing
    changes; one backup of each file is kept in ~/.cache/ragmem/backups.
    --uninstall removes only ragmem's own entries. See docs/agents.md.
    """)
    @click.option("--budget", type=click.IntRange(1), default=1500, show_default=True, metavar="TOKENS",
                  help="Most tokens of the recalled context (and at most 10,000 characters).")
    @click.option("--server", metavar="URL", envvar="RAGMEM_SERVER", default=None,
                  help="Go through a running `ragmem serve` at URL (its model is loaded; env RAGMEM_SERVER).")
    @click.option("--key", metavar="KEY", envvar="RAGMEM_KEY", default=None,
                  help="The key for --server (env RAGMEM_KEY; keep it out of settings files).")
    @click.option("--no-daemon", "no_daemon", is_flag=True,
                  help="Work in this process: neither ask nor start the store's background hook worker.")
    @click.option("--install", "do_install", is_flag=True, help="Add ragmem's hooks to the agent's settings.")
    @click.option("--uninstall", "do_uninstall", is_flag=True, help="Remove ragmem's hooks from the agent's settings.")
    @click.option("--project", "scope", flag_value="project", default=None,
                  help="With --install/--uninstall: your settings of this project (Claude Code's default).")
    @click.option("--user", "scope", flag_value="user",
                  help="With --install/--uninstall: your user settings (Codex's default: it has no others).")
    @click.option("--no-mcp", "no_mcp", is_flag=True, help="With --install: leave the agent's MCP servers alone.")
    @_common
    def command(budget: int, server: str | None, key: str | None, no_daemon: bool, do_install: bool,
                do_uninstall: bool, scope: str | None, no_mcp: bool, **opts: Any) -> None:
        from . import _hooks

        if do_install or do_uninstall:
            if do_install and do_uninstall:
                from ragmem._errors import UsageError

                raise UsageError("--install and --uninstall go one at a time")
            cfg = _cfg(**opts)
            _install(agent, cfg, scope or _hooks.default_scope(agent), do_install, budget=budget, server=server,
                     no_daemon=no_daemon, mcp=not no_mcp)
            return
        raw = sys.stdin.read()
        store = opts.get("store_") or DEFAULT_STORE
        start_worker = False
        try:
            cfg = _cfg(**opts)
            store = cfg.store
            if server:
                if not key:
                    from ragmem._errors import UsageError

                    raise UsageError("--server needs the key of the namespace: --key or RAGMEM_KEY")
                out = _hooks.run_remote(agent, raw, server=server, key=key, log_to=store, budget=budget)
            else:
                _hooks.require_store(cfg.store, cfg.log_url, agent)  # never creates one: a mistyped --store is logged
                out, start_worker = _hook_here(agent, raw, cfg, budget, daemon=not no_daemon)
        except Exception as exc:  # noqa: BLE001 - a hook never blocks the agent: logged, nothing printed
            _hooks.log_failure(store, agent, exc, _hooks.event_name(raw))
            out = ""
        if out:
            click.echo(out)
        if start_worker:  # after the answer is out: the agent is not kept waiting for the fork
            sys.stdout.flush()
            from . import _hookd

            _hookd.spawn(cfg.store, _opening(cfg))

    return command


def _install(agent: str, cfg: Config, scope: str, install: bool, *, budget: int, server: str | None,
             no_daemon: bool, mcp: bool) -> None:
    """``hook AGENT --install`` / ``--uninstall``: ragmem's hooks and MCP server in the agent's personal settings.

    What names this person's paths (the virtualenv, the store) goes only where the agent keeps one person's
    settings (:func:`ragmem._hooks.settings_path`, :func:`ragmem._hooks.mcp_path`); ragmem's entries in the
    project's shared file, where an older ragmem wrote them, are taken out.
    """
    from . import _hooks

    project = os.getcwd()
    path = _hooks.settings_path(agent, scope, project)  # type: ignore[arg-type]
    shared = _hooks.shared_path(agent, project)
    created, excluded = False, None
    namespace = cfg.namespace if cfg.namespace != "default" else None
    if install:
        if not server and not _store_exists(cfg):  # the user's opt-in: the hook itself never makes one
            _open(cfg).close()
            created = True
        extra = ([] if budget == 1500 else ["--budget", str(budget)]) + (["--server", server] if server else [])
        extra += ["--no-daemon"] if no_daemon else []
        if namespace:
            extra = ["--namespace", namespace, *extra]
        changes = [_hooks.install(agent, path, _hooks.hook_command(agent, cfg.store, extra))]
        if agent == "claude-code" and scope == "project":
            excluded = _hooks.keep_out_of_git(path, project)
    else:
        changes = [_hooks.uninstall(agent, path)]
    if shared != path and shared.exists():
        changes.append(_hooks.uninstall(agent, shared))
    if mcp and not server:
        # a search that names no session looks in this project's sessions (docs/mcp.md, --scope)
        where = f"project:{project}" if scope == "project" else "project"
        entry = _hooks.mcp_server(cfg.store, where, namespace) if install else None
        changes.append(_hooks.install_mcp(agent, scope, project, entry))  # type: ignore[arg-type]
    shown = [changes[0], *(c for c in changes[1:] if c.changed)]

    def lines() -> list[str]:
        out = [f"created the store {os.path.abspath(cfg.store)}"] if created else []
        for c in shown:
            out += c.lines()
        if excluded is not None:
            out.append(f"{path} is yours alone: git ignores it now ({excluded})")
        return out

    first = changes[0]
    _emit(cfg, {"settings": str(first.path), "changed": first.changed, "added": first.added,
                "replaced": first.replaced, "removed": first.removed,
                "backup": str(first.backup) if first.backup else None, "files": [c.as_dict() for c in changes],
                "created_store": os.path.abspath(cfg.store) if created else None,
                "git_excluded_in": str(excluded) if excluded else None}, lines)


def _store_exists(cfg: Config) -> bool:
    """Whether ``cfg``'s store exists (the hook's check, :func:`ragmem._hooks.require_store`)."""
    from . import _hooks
    from ._errors import StoreError

    try:
        _hooks.require_store(cfg.store, cfg.log_url)
    except StoreError:
        return False
    return True


def _opening(cfg: Config) -> dict[str, Any]:
    """The options that open ``cfg``'s store, as the hook's worker must open it too."""
    return {"log_url": cfg.log_url, "chroma_url": cfg.chroma_url, "embedder": cfg.embedder,
            "trust_config": cfg.trust_config}


def _hook_here(agent: str, raw: str, cfg: Config, budget: int, *, daemon: bool) -> tuple[str, bool]:
    """The hook's answer on this machine, and whether to start the store's worker once it is printed.

    With ``daemon``, the store's worker answers when one is running (this process then imports neither
    Chroma nor the model, see ``_hookd.py``); otherwise, or on any failure of it, the work is done here
    as always, and a worker is started for the next call, if this one worked. An event that is not
    answered (it only imports) is handed to the worker without waiting, or, with none running, starts one.
    """
    from . import _hookd, _hooks
    from ._errors import UsageError

    handed: set[str] = set()
    if daemon:
        request = {"v": _hookd.VERSION, "store": os.path.abspath(cfg.store),
                   "fingerprint": _hookd.fingerprint(cfg.store, _opening(cfg)), "agent": agent, "event": raw,
                   "namespace": cfg.namespace, "session": cfg.session, "budget": budget, "max_chars": _hooks.MAX_CHARS}
        try:
            event = _hooks.read_event(agent, raw)
            only_imports = not event.answered
        except UsageError:
            event, only_imports = None, False  # answered below, in process, where the mistake is logged
        if only_imports:
            # Stop, PostToolUse, PreCompact...: the agent waits for every hook, so the worker embeds the new
            # lines after this process has exited; with no worker, the one started here imports them first.
            # Only while another hook is starting one (its lock held, not yet listening) is it done here.
            slim = {**request, "event": _hooks.slim_event(raw)}
            if _hookd.hand_over(cfg.store, slim) or _hookd.spawn(cfg.store, _opening(cfg), first=slim) is not None:
                return "", False
        else:
            answered = _hookd.ask(cfg.store, request)
            if answered is not None:
                return answered, False
            if event is not None and event.transcript and _hookd.worker_pid(cfg.store) is not None:
                handed.add(event.transcript)  # alive, busy past the deadline with the lines handed to it: not twice
    out, ok = _hooks.run_status(agent, raw, open_memory=lambda: _open(cfg, create=False), store=cfg.store,
                                budget=budget, handed=handed)
    return out, daemon and ok


hook_claude_code = _hook_command("claude-code", "Claude Code",
                                 ".claude/settings.local.json of this project (--user: ~/.claude/settings.json)",
                                 "~/.claude.json (this project's, or --user's)")
hook_codex = _hook_command("codex", "Codex CLI", "~/.codex/hooks.json (Codex keeps no personal file in a project)",
                           "~/.codex/config.toml")


# ------------------------------------------------------------------ serve and keys


@cli.command()
@click.option("--host", default="127.0.0.1", show_default=True, metavar="HOST",
              help="Address to listen on (0.0.0.0: every interface; put TLS in front).")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True, metavar="N",
              help="Port to listen on (0: any free port, printed on stderr).")
@click.option("--max-body", type=click.IntRange(1), default=4 * 1024 * 1024, show_default=True, metavar="BYTES",
              help="Largest request body; a larger one gets 413.")
@click.option("--rate", type=click.FloatRange(0), default=50.0, show_default=True, metavar="N",
              help="Requests per second each key may make, sustained (0: no limit); beyond, 429.")
@click.option("--burst", type=click.IntRange(1), default=100, show_default=True, metavar="N",
              help="Requests a key may make at once above --rate.")
@click.option("--allowed-host", "allowed_hosts", multiple=True, metavar="NAME[:PORT]",
              help="A Host its clients (or its proxy) use, besides the loopback names and --host; repeat for "
                   "more. Any other Host gets 421.")
@click.option("--allowed-origin", "allowed_origins", multiple=True, metavar="ORIGIN",
              help="A site whose pages may call the server (https://app.example), besides pages of the allowed "
                   "hosts; repeat for more. Any other Origin gets 403.")
@click.option("--header-timeout", type=click.FloatRange(0, min_open=True), default=10.0, show_default=True,
              metavar="S", help="Seconds a connection has to send a request's headers; then 408, closed.")
@click.option("--body-timeout", type=click.FloatRange(0, min_open=True), default=30.0, show_default=True,
              metavar="S", help="Seconds after the headers to send the body; then 408, closed.")
@click.option("--max-connections", type=click.IntRange(1), default=1000, show_default=True, metavar="N",
              help="Connections served at once; beyond, 503.")
@click.option("--keep-alive", type=click.IntRange(1), default=5, show_default=True, metavar="S",
              help="Seconds an idle keep-alive connection stays open.")
@_common
def serve(host: str, port: int, max_body: int, rate: float, burst: int, allowed_hosts: tuple[str, ...],
          allowed_origins: tuple[str, ...], header_timeout: float, body_timeout: float, max_connections: int,
          keep_alive: int, **opts: Any) -> None:
    """Serve the store over HTTP to many agents: MCP at /mcp, a JSON API, a page at /.

    Every request needs `Authorization: Bearer KEY`; each key (`ragmem keys
    add NAMESPACE`) reaches only its namespace. Replicas on one --log-url and
    one --chroma-url share everything, keys included. See docs/serve.md.
    """
    cfg = _cfg(**opts)
    from ._serve import ServeSettings, serve as run

    extra: dict[str, Any] = {"embedder": cfg.embedder} if cfg.embedder else {}
    settings = ServeSettings(host=host, port=port, max_body=max_body, rate=rate, burst=burst,
                             allowed_hosts=allowed_hosts, allowed_origins=allowed_origins,
                             header_timeout=header_timeout, body_timeout=body_timeout,
                             max_connections=max_connections, keep_alive=keep_alive)
    run(cfg.store, settings=settings, log_url=cfg.log_url, chroma_url=cfg.chroma_url, create=False, **extra)


@cli.group()
def keys() -> None:
    """Keys of `ragmem serve`: each bound to a namespace, stored hashed in the store's log."""


def _keys(cfg: Config) -> tuple["Memory", Any]:
    from ._keys import Keys

    mem = _open(cfg)
    return mem, Keys(mem.store.log)


@keys.command("add")
@click.argument("namespaces", nargs=-1, required=True, metavar="NAMESPACE...")
@click.option("--label", default="", metavar="TEXT", help="A note on who holds the key (shown by `keys list`).")
@_common
def keys_add(namespaces: tuple[str, ...], label: str, **opts: Any) -> None:
    """Make a key bound to NAMESPACE (several: an operator key); the key is the last line, shown once."""
    cfg = _cfg(**opts)
    mem, store_keys = _keys(cfg)
    with mem:
        key, info = store_keys.add(namespaces, label=label)
    if cfg.json:
        click.echo(json.dumps({**info.as_dict(), "key": key}, indent=2))
        return
    click.echo(f"key {info.id} for namespace {', '.join(info.namespaces)}; it is shown once, keep it secret:",
               err=True)
    click.echo(key)


@keys.command("list")
@_common
def keys_list(**opts: Any) -> None:
    """List the keys: id, namespaces, date, label (never a key)."""
    cfg = _cfg(**opts)
    mem, store_keys = _keys(cfg)
    with mem:
        infos = store_keys.list()
    _emit(cfg, [i.as_dict() for i in infos], lambda: [
        f"{i.id}  {i.created_at}  {','.join(i.namespaces)}" + (f"  {i.label}" if i.label else "") for i in infos
    ] or ["no keys"])


@keys.command("revoke")
@click.argument("key_id", metavar="ID")
@_common
def keys_revoke(key_id: str, **opts: Any) -> None:
    """Revoke a key by its id (or the key itself); running servers refuse it within a second."""
    cfg = _cfg(**opts)
    mem, store_keys = _keys(cfg)
    with mem:
        info = store_keys.revoke(key_id)
    _emit(cfg, {"revoked": info.as_dict()}, f"revoked key {info.id} ({', '.join(info.namespaces)})")


# ------------------------------------------------------------------ entry point


#: Exit status of a bug (an error outside the RagmemError tree): neither success, a user's error (1) nor usage (2).
BUG_EXIT = 3


def main(argv: list[str] | None = None) -> None:
    """Console entry point: run the CLI, turning ragmem's errors into one line on stderr.

    Only a :class:`~ragmem._errors.RagmemError` is a user's error (``ragmem: error: ...``,
    status 1). Any other exception is a bug in ragmem, and shows as one: its traceback,
    a line asking for a report, status :data:`BUG_EXIT`.
    """
    from ragmem._errors import RagmemError

    try:
        cli.main(args=argv, prog_name="ragmem", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(1)
    except click.UsageError as exc:  # a bad option: a UsageError, as every door says one (exit 2, click's)
        _fail(f"UsageError: {_usage_error(exc)}", status=exc.exit_code)
    except click.ClickException as exc:  # usage errors: click's own message, exit 2
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except RagmemError as exc:
        _fail(f"{type(exc).__name__}: {exc.for_door('cli')}")
    except BrokenPipeError:  # `ragmem export | head`: the reader left; not an error worth a message
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(1)
    except Exception as exc:  # noqa: BLE001 - not a RagmemError: a bug, never dressed up as the user's mistake
        _bug(exc)


def _bug(exc: BaseException) -> None:
    import traceback

    from ragmem import __version__

    traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
    click.echo(f"ragmem: bug: {type(exc).__name__} is not an error ragmem reports; this is a bug in ragmem "
               f"{__version__}. Please report it with the traceback above and the command you ran.", err=True)
    sys.exit(BUG_EXIT)


def _fail(message: str, status: int = 1) -> None:
    first = " ".join(str(message).split())  # one line, whatever the message held
    click.echo(f"ragmem: error: {first}", err=True)
    sys.exit(status)


def _usage_error(exc: click.UsageError) -> str:
    """Click's refusal of an option, with the way to the command's help; an unknown option in the words every
    door refuses an unknown argument with (:func:`ragmem._doors.unknown_arguments`: the known ones listed)."""
    from ._doors import unknown_arguments

    ctx = exc.ctx
    if ctx is None:  # pragma: no cover - click gives the context of the command it parsed
        return exc.format_message()
    if isinstance(exc, click.NoSuchOption):
        known = [o for p in ctx.command.get_params(ctx) if isinstance(p, click.Option)
                 for o in p.opts + p.secondary_opts]
        refused = unknown_arguments([exc.option_name], known, "cli", f"`{ctx.command_path}`")
        if refused is not None:
            return str(refused)
    return f"{exc.format_message().rstrip('.')}; `{ctx.command_path} --help` shows the options"


if __name__ == "__main__":  # pragma: no cover
    main()
