"""The trace as plain data: ``Trace.to_dict`` is built by hand for speed, and must stay what ``asdict`` gives."""

from __future__ import annotations

import json
from dataclasses import asdict, fields

from ragmem._trace import DropTrace, EpisodeTrace, ExcerptTrace, Trace, UnitTrace


def full_trace() -> Trace:
    """A trace with every field set away from its default, so that a field added later is compared too."""
    return Trace(
        strategy="ragmem", format="openai", budget=1000, limit=900, total_tokens=450,
        sections={"window": 300, "recall": 150}, level="warn", timings={"embed": 0.01},
        included=[UnitTrace("recall", "u1", ["m1", "m2"], 120, 0.81, 4), UnitTrace("window", "u2", ["m3"], 30)],
        dropped=[DropTrace("recall", "u3", ["m4"], 500, "over the recall share", 0.2)],
        summary_covers=["m0"], queries=["pool size"], marker_tokens=12,
        episodes=[EpisodeTrace("s", 3, 5, 0.81, ["u1"], skipped=1, marker="[Mon 4 Mar 2024]", marker_tokens=8)],
        excerpts=[ExcerptTrace("m2", "u1", 100, 900, 9000, 2400, 260, more=[[1200, 1500]])],
    )


def test_to_dict_is_asdict_plus_utilisation():
    trace = full_trace()
    unset = [f.name for f in fields(Trace) if getattr(trace, f.name) == getattr(Trace("x", "y", 1, 1), f.name)]
    assert unset == [], f"set {unset} in full_trace(), so that to_dict is checked on them"
    want = {**asdict(trace), "utilisation": 0.5}
    assert trace.to_dict() == want
    assert json.loads(json.dumps(trace.to_dict())) == want  # plain JSON data, nothing to convert


def test_to_dict_is_a_copy():
    trace = full_trace()
    d = trace.to_dict()
    d["included"][0]["message_ids"].append("x")
    d["sections"]["window"] = 0
    d["episodes"][0]["unit_ids"].clear()
    assert trace.included[0].message_ids == ["m1", "m2"] and trace.sections["window"] == 300
    assert trace.episodes[0].unit_ids == ["u1"]
