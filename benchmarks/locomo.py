"""The LoCoMo loader, as the benchmarks use it.

The loader lives in the library (:mod:`ragmem.locomo`, shared with the demo
and ``ragmem ingest --format locomo``); this module re-exports it so the
benchmarks read the data exactly as users do. See that module for the data
layout, the role mapping and the evidence cleaning.
"""

from ragmem.locomo import (  # noqa: F401 - re-exported
    CATEGORIES,
    TURN_SPACING,
    Conversation,
    Question,
    Turn,
    clean_evidence,
    data_dir,
    evidence_report,
    load_conversations,
    message_id,
    normalize_dia_id,
    parse_conversation,
    parse_session_time,
)
