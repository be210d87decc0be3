import sys
from pathlib import Path

# tests import their helpers (tests/toy.py) as a top-level module
sys.path.insert(0, str(Path(__file__).parent))
