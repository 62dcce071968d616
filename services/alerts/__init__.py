"""Drift alerts, in rooms that each import only the rooms before them (tests/unit/alerts/test_imports.py):
lifecycle (an alert and its state) → detection → explain → notify → evaluation (the evaluator, its stored state, the
leader's tick, the backtest) → oncall (what engineers do with alerts)."""
