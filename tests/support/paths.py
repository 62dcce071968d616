"""Where the tests find the repository and their fixtures, wherever a test file sits."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
