"""The kinds of alert the evaluators open, and what every alert carries beside its kind: labels, units, states."""

from __future__ import annotations

DRIFT_KIND = "hallucination_rate_rise"  # worse on the same mix of questions: a regression, pages
MIX_KIND = "mix_shift"  # the rise is mostly a change in the mix of questions: a warning
KINDS = (DRIFT_KIND, MIX_KIND)  # the drift evaluator's kinds
AGREEMENT_KIND = "verifier_agreement"  # the verifier agrees with human labels less than it did: a warning
SILENT_KIND = "route_silent"  # the route's events fell far below its time of day: pages
REJECTED_KIND = "events_rejected"  # the route's share of dead-lettered events rose: pages
ABSTENTION_KIND = "abstention_rise"  # the route abstains more while serving less: a warning by default
# the input-health kinds (services/alerts/detection/input_health.py)
INPUT_KINDS = (SILENT_KIND, REJECTED_KIND, ABSTENTION_KIND)
EVALUATED_KINDS = KINDS + INPUT_KINDS  # every kind the minute evaluator opens
# new routes are refused over routes.max_active: pages (services/alerts/evaluation/cardinality.py)
CARDINALITY_KIND = "route_cardinality"
MONITOR_KINDS = INPUT_KINDS + (CARDINALITY_KIND,)  # alerts on the monitor's own input, each with a runbook of its own
SLO_KIND = "slo_burn"  # an SLO's error budget burns too fast (services/alerts/detection/slo_burn.py): page or ticket
FLEET_ROUTE = "*"  # the route of an alert on every route at once (no route may be named "*")
UNITS = (
    "share",
    "per_minute",
    "burn",
)  # rate, expected, baseline and delta: a share of claims/answers/events, events a minute, or an SLO's burn rate
STATES = ("pending", "firing", "resolved")
SERVICE_LABELS = {"service": "claimwatch"}  # the extra labels the evaluators put on every alert
MATCH_LABEL_NAMES = ("route", "kind", "severity", *SERVICE_LABELS)  # what silences can match (see match_labels)
