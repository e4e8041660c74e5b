"""Where the checkout and the test data are, for tests at any depth of tests/."""
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"
DATA = TESTS / "data"
