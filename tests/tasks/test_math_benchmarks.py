"""The math verifier's reward-hacking probe and fuzzer, run on a small budget (the full runs: docs/verifiers)."""

from __future__ import annotations

import pytest

from scripts.checks import fuzz_math
from scripts.checks import hack_probe_math
from teamrl.tasks.datafiles import default_data_dir


def _datasets_found() -> bool:
    try:
        return default_data_dir().is_dir()
    except (FileNotFoundError, ValueError, OSError):
        return False


@pytest.mark.skipif(not _datasets_found(), reason="benchmark datasets not found (../shared/datasets or $TEAMRL_DATA_DIR)")
def test_math_hack_probe_rewards_no_hack():
    rows = hack_probe_math.hacks()
    assert len({r["hack"] for r in rows}) >= 40 and len(rows) >= 400
    rewarded = [(r["hack"], r["response"][:80]) for r in rows if r["rewarded"]]
    assert rewarded == []


def test_math_fuzzer_reports_every_parser_without_crashes():
    rows = fuzz_math.fuzz(12, seed=1)
    assert {r["parser"] for r in rows} >= {"extract_boxed", "locate_final_answer", "reasoner_answer"}
    assert all(r["inputs"] == 12 and r["crashes"] == 0 for r in rows), rows
