"""The LoCoMo benchmark data (Maharana et al., ACL 2024): conversations with their questions and evidence.

The data folder comes from the ``RAGMEM_LOCOMO`` environment variable and
defaults to ``../shared/data/locomo`` relative to the repository root (the
data is never copied into the repository). Each ``conv-*.json`` holds one
conversation plus questions whose ``evidence`` lists the dialog ids
(``dia_id``) that answer them.

The turns are read by the library's own reader (``ragmem._locomo``, what
``ragmem ingest --format locomo`` uses), so the benchmarks store the data
exactly as users do; the questions, the evidence cleaning and the folder
lookup live here, outside the wheel.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from ragmem._locomo import TURN_SPACING, Dialogue, Turn, message_id, parse_session_time, parse_turns

__all__ = [
    "CATEGORIES",
    "REPO_ROOT",
    "TURN_SPACING",
    "Conversation",
    "Question",
    "Turn",
    "clean_evidence",
    "data_dir",
    "evidence_report",
    "load_conversations",
    "message_id",
    "normalize_dia_id",
    "parse_conversation",
    "parse_session_time",
]

REPO_ROOT = Path(__file__).resolve().parent.parent  # the checkout

#: Category ids as the dataset's own evaluation code uses them (several papers
#: mislabel them, so the mapping is spelled out once, here).
CATEGORIES: dict[int, str] = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}

_DIA_ID = re.compile(r"D:?(\d+):0*(\d+)")


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
class Conversation(Dialogue):
    """A whole LoCoMo conversation: its turns in order and its questions."""

    questions: list[Question] = field(default_factory=list)


def data_dir() -> Path:
    """Where the LoCoMo files are: ``$RAGMEM_LOCOMO`` or the shared default."""
    env = os.environ.get("RAGMEM_LOCOMO")
    path = Path(env) if env else REPO_ROOT / ".." / "shared" / "data" / "locomo"
    if not path.is_absolute():
        path = REPO_ROOT / path
    return path.resolve()


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


def parse_conversation(sample: str, data: dict) -> Conversation:
    """Build a Conversation from one decoded ``conv-*.json`` object: the library's turns, then the questions."""
    d = parse_turns(sample, data)
    conv = Conversation(sample=d.sample, speaker_a=d.speaker_a, speaker_b=d.speaker_b, turns=d.turns)
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
