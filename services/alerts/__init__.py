"""Drift detection and the alert lifecycle: detect → lifecycle (merge, state) → silences → notify."""
