"""The record of one prompt assembly: :class:`Context`, :class:`Trace` and the budget monitor."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Level = Literal["ok", "warn", "critical"]


@dataclass(frozen=True)
class BudgetMonitor:
    """Reports how full a prompt is against warn and critical thresholds (fractions of the limit)."""

    warn: float = 0.80
    critical: float = 0.95

    def level(self, used: int, limit: int) -> Level:
        u = used / limit if limit else 1.0
        return "critical" if u >= self.critical else "warn" if u >= self.warn else "ok"


@dataclass(frozen=True)
class UnitTrace:
    """A unit placed in the prompt."""

    section: str  # "recall" | "window"
    unit_id: str
    message_ids: list[str]
    tokens: int
    score: float | None = None
    seq: int = -1


@dataclass(frozen=True)
class DropTrace:
    """A unit left out of the prompt, and why."""

    section: str
    unit_id: str
    message_ids: list[str]
    tokens: int
    reason: str
    score: float | None = None


@dataclass
class Trace:
    """What went into one prompt: tokens per section, units in and out, and timings."""

    strategy: str
    format: str
    budget: int
    limit: int  # budget minus the reserve for the response
    total_tokens: int = 0
    sections: dict[str, int] = field(default_factory=dict)
    included: list[UnitTrace] = field(default_factory=list)
    dropped: list[DropTrace] = field(default_factory=list)
    level: Level = "ok"
    timings: dict[str, float] = field(default_factory=dict)
    summary_covers: list[str] = field(default_factory=list)
    #: A query expander's extra queries, searched besides the turn (none without an expander).
    queries: list[str] = field(default_factory=list)

    @property
    def utilisation(self) -> float:
        return self.total_tokens / self.limit if self.limit else 0.0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["utilisation"] = round(self.utilisation, 4)
        return d

    def __str__(self) -> str:
        lines = [
            (f"strategy={self.strategy} format={self.format} tokens={self.total_tokens}/{self.limit} "
            f"(budget {self.budget}, {self.utilisation:.0%}, {self.level})"),
            "sections: " + ", ".join(f"{k}={v}" for k, v in self.sections.items()),
        ]
        for u in self.included:
            score = f" score={u.score:.3f}" if u.score is not None else ""
            lines.append(f"  + {u.section:<6} {u.unit_id} ({len(u.message_ids)} msg, {u.tokens} tok){score}")
        for d in self.dropped:
            score = f" score={d.score:.3f}" if d.score is not None else ""
            lines.append(f"  - {d.section:<6} {d.unit_id} ({d.tokens} tok){score}: {d.reason}")
        if self.queries:
            lines.append("queries: " + " | ".join(self.queries))
        if self.timings:
            lines.append("timings ms: " + ", ".join(f"{k}={v * 1000:.1f}" for k, v in self.timings.items()))
        return "\n".join(lines)


@dataclass
class Context:
    """An assembled prompt: ``messages`` ready to send, and its ``trace``.

    For ``format="anthropic"``, ``system`` holds the separate system prompt and
    ``messages`` the alternating turns; for ``"openai"`` the system prompt is
    the first message and ``system`` is ``None``.
    """

    messages: list[dict[str, Any]]
    trace: Trace
    system: str | None = None

    def message_ids(self) -> list[str]:
        """Ids of the stored messages placed in this prompt (recall, then window)."""
        return [mid for u in self.trace.included for mid in u.message_ids]

    def to_dict(self) -> dict[str, Any]:
        return {"system": self.system, "messages": self.messages, "trace": self.trace.to_dict()}
