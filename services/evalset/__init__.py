"""The eval set: promotion of traces with sign-off (promotion) and its metrics and CI gate (metrics)."""
from services.evalset.metrics import (
    AbstentionPair, Agreement, DisagreementSlice, EvalReport, Figure, GateFailure, GateResult, ItemOutcome, LabelPair,
    SliceFigure, agreement, cohen_kappa, confusion_matrix, disagreement_slices, eval_report, gate, parse_slice_min,
)
from services.evalset.promotion import (
    ORIGIN_RUN, Duplicate, EvalItem, HistoryEntry, NearDuplicateError, PromotionError, PromotionService,
    TraceClaim, TraceRecord, load_label_pairs, load_outcomes, load_traces,
)

__all__ = [
    "AbstentionPair", "Agreement", "DisagreementSlice", "EvalReport", "Figure", "GateFailure", "GateResult", "ItemOutcome",
    "LabelPair", "SliceFigure", "agreement", "cohen_kappa", "confusion_matrix", "disagreement_slices", "eval_report", "gate",
    "parse_slice_min", "ORIGIN_RUN", "Duplicate", "EvalItem", "HistoryEntry", "NearDuplicateError",
    "PromotionError", "PromotionService", "TraceClaim", "TraceRecord", "load_label_pairs", "load_outcomes", "load_traces",
]
