"""Make the checkout importable as the collection specdec.serve (through collections/)."""
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
for path in (REPO / "collections", REPO / "lab" / "emulator", REPO / "lab"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))
