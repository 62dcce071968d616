"""Drift and input-health detection: the detector settings, the seasonal baseline, the engines that step many
routes at once, every route's detectors together, and what they expect of each route."""
