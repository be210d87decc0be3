import os
import sys
from pathlib import Path

import torch

# tests import their helpers (tests/toy.py) as a top-level module
sys.path.insert(0, str(Path(__file__).parent))

# One intra-op thread for the tiny test models: on the loaded 2-core CI machine, thread contention
# made tiny-model steps ~9x slower (19 s vs 2.1 s measured for one per-agent step).
torch.set_num_threads(1)
# train.threads=auto takes OMP_NUM_THREADS as given: runs inside tests (and their child processes)
# keep one thread too, so that their arithmetic is the same wherever they run.
os.environ.setdefault("OMP_NUM_THREADS", "1")
