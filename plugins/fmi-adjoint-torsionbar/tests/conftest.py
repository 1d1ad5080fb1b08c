"""Make the plugin importable without installing it (tests fake its entry point)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
# The suite's named tolerance tiers (tests/tolerances.py), also when these tests run alone.
sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tests"))
