"""Rates from minute buckets, with intervals that resample answers."""
