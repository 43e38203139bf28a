"""The LoCoMo file format (Maharana et al., ACL 2024), as ``ragmem ingest --format locomo`` reads it.

Each ``conv-*.json`` holds one conversation between ``speaker_a`` and
``speaker_b``, split into dated sessions (``session_N`` with its
``session_N_date_time``). Only the dialogue is read here: the questions, their
evidence and the data folder belong to the benchmarks (``benchmarks/locomo.py``,
which builds on this module so both read the turns the same way). The
authors' per-session observations, summaries and event annotations are never
touched: they would leak the answers into the memory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

#: Turns within one session are this far apart, so that their order survives
#: any sort by time while they all stay on the session's date.
TURN_SPACING = timedelta(seconds=10)

_SESSION_KEY = re.compile(r"session_(\d+)")


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
        """What the stored message's metadata holds: the dialog id, the speaker and the session number."""
        return {"dia_id": self.dia_id, "speaker": self.speaker, "session_no": self.session_no}

    def to_openai(self) -> dict:
        """The turn as a plain OpenAI chat message (no id, no time)."""
        return {"role": self.role, "content": self.content}

    def to_message(self) -> dict:
        """The turn as a message for :meth:`ragmem.Memory.add_many`: id, time and metadata included."""
        return {**self.to_openai(), "id": self.id, "created_at": self.created_at, "metadata": self.metadata}


@dataclass
class Dialogue:
    """The turns of one LoCoMo conversation, in order."""

    sample: str
    speaker_a: str
    speaker_b: str
    turns: list[Turn] = field(default_factory=list)

    @property
    def sessions(self) -> list[int]:
        """The session numbers that hold turns, in order."""
        return sorted({t.session_no for t in self.turns})


def message_id(sample: str, dia_id: str) -> str:
    """The id a LoCoMo turn is stored under: unique across conversations."""
    return f"{sample}/{dia_id}"


def parse_session_time(text: str) -> datetime:
    """Parse LoCoMo's "1:56 pm on 8 May, 2023" into an aware UTC datetime."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=timezone.utc)


def _turn_content(speaker: str, raw: dict) -> str:
    content = f"{speaker}: {raw['text']}"
    caption = raw.get("blip_caption")
    if caption:
        content += f" [shares a photo: {caption}]"
    return content


def parse_turns(sample: str, data: dict[str, Any]) -> Dialogue:
    """The dialogue of one decoded ``conv-*.json`` object.

    speaker_a speaks as ``user``, speaker_b as ``assistant``.
    """
    conv_data = data.get("conversation", data)  # the original locomo10.json nests it
    speaker_a, speaker_b = conv_data["speaker_a"], conv_data["speaker_b"]
    roles = {speaker_a: "user", speaker_b: "assistant"}
    conv = Dialogue(sample=sample, speaker_a=speaker_a, speaker_b=speaker_b)

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
    return conv
