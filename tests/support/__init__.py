"""Test doubles and helpers shared by the test suites (never imported by the product)."""
