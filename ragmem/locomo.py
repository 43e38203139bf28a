"""Loader for the LoCoMo conversations (Maharana et al., ACL 2024).

Used by the demo, the CLI's ``ingest --format locomo`` and the benchmarks. The
data folder comes from the ``RAGMEM_LOCOMO`` environment variable and defaults
to ``../shared/data/locomo`` relative to the repository root (the data is
never copied into the repository). Each
``conv-*.json`` holds one conversation between ``speaker_a`` and ``speaker_b``
split into dated sessions, plus questions whose ``evidence`` lists the dialog
ids (``dia_id``) that answer them.

Only the turns and the questions are read. The authors' per-session
observations, summaries and event annotations are never touched: they would
leak the answers into the memory.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent  # the checkout, for an editable install

#: Category ids as the dataset's own evaluation code uses them (several papers
#: mislabel them, so the mapping is spelled out once, here).
CATEGORIES: dict[int, str] = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}

#: Turns within one session are this far apart, so that their order survives
#: any sort by time while they all stay on the session's date.
TURN_SPACING = timedelta(seconds=10)

_SESSION_KEY = re.compile(r"session_(\d+)")
_DIA_ID = re.compile(r"D:?(\d+):0*(\d+)")


@dataclass(frozen=True)
class Turn:
    """One dialog turn, already mapped onto a chat message."""

    sample: str  # the file stem, e.g. "conv-26"
    dia_id: str  # e.g. "D1:3"
    speaker: str
    role: str  # "user" for speaker_a, "assistant" for speaker_b
    text: str
    content: str  # what is stored: "{speaker}: {text}" plus a photo caption
    session_no: int
    created_at: datetime

    @property
    def id(self) -> str:
        """The message id ragmem stores the turn under."""
        return message_id(self.sample, self.dia_id)

    @property
    def metadata(self) -> dict:
        return {"dia_id": self.dia_id, "speaker": self.speaker, "session_no": self.session_no}

    def to_openai(self) -> dict:
        """The turn as a plain OpenAI chat message (no id, no time)."""
        return {"role": self.role, "content": self.content}

    def to_message(self) -> dict:
        """The turn as a message for :meth:`ragmem.Memory.add_many`: id, time and metadata included."""
        return {**self.to_openai(), "id": self.id, "created_at": self.created_at, "metadata": self.metadata}


@dataclass(frozen=True)
class Question:
    """One QA item with its evidence cleaned to dia_ids that exist."""

    sample: str
    question: str
    answer: str
    category: int
    evidence: tuple[str, ...]  # cleaned dia_ids, all present in the conversation
    dropped_evidence: tuple[str, ...] = ()  # raw ids that were malformed or unknown
    raw_evidence: tuple[str, ...] = ()  # the evidence field as released

    @property
    def category_name(self) -> str:
        return CATEGORIES.get(self.category, str(self.category))

    @property
    def evidence_ids(self) -> list[str]:
        """Evidence as ragmem message ids."""
        return [message_id(self.sample, d) for d in self.evidence]


@dataclass
class Conversation:
    """A whole LoCoMo conversation: its turns in order and its questions."""

    sample: str
    speaker_a: str
    speaker_b: str
    turns: list[Turn] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)

    @property
    def sessions(self) -> list[int]:
        return sorted({t.session_no for t in self.turns})


def message_id(sample: str, dia_id: str) -> str:
    """The id a LoCoMo turn is stored under: unique across conversations."""
    return f"{sample}/{dia_id}"


def data_dir() -> Path:
    """Where the LoCoMo files are: ``$RAGMEM_LOCOMO`` or the shared default."""
    env = os.environ.get("RAGMEM_LOCOMO")
    path = Path(env) if env else REPO_ROOT / ".." / "shared" / "data" / "locomo"
    if not path.is_absolute():
        path = REPO_ROOT / path
    return path.resolve()


def parse_session_time(text: str) -> datetime:
    """Parse LoCoMo's "1:56 pm on 8 May, 2023" into an aware UTC datetime."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=timezone.utc)


def normalize_dia_id(raw: str) -> str | None:
    """Repair the malformed ids of the released file, or return None.

    ``D:11:26`` becomes ``D11:26`` and ``D30:05`` becomes ``D30:5``; a bare
    ``D`` has no repair.
    """
    m = _DIA_ID.fullmatch(raw.strip())
    return f"D{int(m.group(1))}:{int(m.group(2))}" if m else None


def clean_evidence(raw: list, known: set[str]) -> tuple[list[str], list[str]]:
    """Split, repair and check evidence ids against the conversation's turns.

    Returns (kept, dropped). Some entries hold two ids in one string
    (``"D8:6; D9:17"``); those are split. An id that cannot be parsed or that
    points to no turn is dropped and reported.
    """
    kept: list[str] = []
    dropped: list[str] = []
    for entry in raw or []:
        for part in re.split(r"[;,\s]+", str(entry)):
            if not part:
                continue
            fixed = normalize_dia_id(part)
            if fixed is not None and fixed in known:
                if fixed not in kept:
                    kept.append(fixed)
            else:
                dropped.append(part)
    return kept, dropped


def _turn_content(speaker: str, raw: dict) -> str:
    content = f"{speaker}: {raw['text']}"
    caption = raw.get("blip_caption")
    if caption:
        content += f" [shares a photo: {caption}]"
    return content


def parse_conversation(sample: str, data: dict) -> Conversation:
    """Build a Conversation from one decoded ``conv-*.json`` object."""
    conv_data = data.get("conversation", data)  # the original locomo10.json nests it
    speaker_a, speaker_b = conv_data["speaker_a"], conv_data["speaker_b"]
    roles = {speaker_a: "user", speaker_b: "assistant"}
    conv = Conversation(sample=sample, speaker_a=speaker_a, speaker_b=speaker_b)

    session_nos = sorted(
        int(m.group(1)) for k in conv_data if (m := _SESSION_KEY.fullmatch(k))
    )
    for n in session_nos:
        start = parse_session_time(conv_data[f"session_{n}_date_time"])
        for i, raw in enumerate(conv_data[f"session_{n}"]):
            speaker = raw["speaker"]
            conv.turns.append(
                Turn(
                    sample=sample,
                    dia_id=raw["dia_id"],
                    speaker=speaker,
                    role=roles.get(speaker, "user"),
                    text=raw["text"],
                    content=_turn_content(speaker, raw),
                    session_no=n,
                    created_at=start + i * TURN_SPACING,
                )
            )

    known = {t.dia_id for t in conv.turns}
    for qa in data.get("qa", []):
        kept, dropped = clean_evidence(qa.get("evidence", []), known)
        answer = qa.get("answer", qa.get("adversarial_answer", ""))
        conv.questions.append(
            Question(
                sample=sample,
                question=qa["question"],
                answer=str(answer),
                category=int(qa["category"]),
                evidence=tuple(kept),
                dropped_evidence=tuple(dropped),
                raw_evidence=tuple(str(e) for e in qa.get("evidence", [])),
            )
        )
    return conv


def _file_order(path: Path) -> tuple:
    digits = re.findall(r"\d+", path.stem)
    return (int(digits[-1]) if digits else 0, path.stem)


def load_conversations(path: str | Path | None = None, limit: int | None = None) -> list[Conversation]:
    """Load every ``conv-*.json`` under ``path`` (default: :func:`data_dir`)."""
    folder = Path(path) if path else data_dir()
    files = sorted(folder.glob("conv-*.json"), key=_file_order)
    if not files:
        raise FileNotFoundError(
            f"no LoCoMo conv-*.json files in {folder}; set RAGMEM_LOCOMO to the folder"
        )
    if limit is not None:
        files = files[:limit]
    return [parse_conversation(f.stem, json.loads(f.read_text())) for f in files]


def evidence_report(convs: list[Conversation]) -> dict:
    """What the evidence cleaning did, for the results file."""
    dropped = {
        f"{q.sample}: {q.question}": list(q.dropped_evidence)
        for c in convs
        for q in c.questions
        if q.dropped_evidence
    }
    repaired = {
        f"{q.sample}: {q.question}": {"raw": list(q.raw_evidence), "used": list(q.evidence)}
        for c in convs
        for q in c.questions
        if q.evidence and list(q.raw_evidence) != list(q.evidence) and not q.dropped_evidence
    }
    return {
        "questions": sum(len(c.questions) for c in convs),
        "repaired_ids": repaired,
        "with_evidence": sum(1 for c in convs for q in c.questions if q.evidence),
        "dropped_ids": dropped,
    }
