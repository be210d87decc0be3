"""`teamrl study NAME --out DIR --check-bits N`: every training run of a folder's finished cells replayed
for its first N steps and compared, bit for bit, with the fingerprint its cell recorded.

The folder check (`teamrl.study.cells`) re-runs one whole cell: it catches a code change that moves every
run, and can miss one that only some runs meet (a rare token, a long answer). This check costs a few steps
per run instead of a cell, so it covers every run: a 7-seed table of 35 runs of 24 steps is checked over
its first 2 steps in a twelfth of its training steps, with no evaluation at all. What it cannot see is a
change that moves a run only after step N; its report says which steps it compared.

Each run is replayed from its own resolved config (`OUT/runs/<run>/config.yaml`) and the base model its
cell recorded (`run_bases`), with `teamrl.training.loop.train(first_steps=N)`, into
`OUT/bit-check/<code>/`; the folder's cells and runs are not touched. The result goes to results.json's
`bit_checks` (code, commit, CPU, steps, each run's verdict). The digests hold on one CPU: run the check
on the host that made the cells (results.json's `commands` name it).
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from teamrl.config import ConfigError, load_config
from teamrl.study import cells, provenance, results_file
from teamrl.training.fingerprint import first_difference
from teamrl.training.loop import train


def check_bits(folder: Path, steps: int, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Replay the first `steps` steps of every fingerprinted run of `folder`'s cells; the check as recorded.

    Raises ConfigError when the folder has no results or none of its cells recorded a fingerprint.
    """
    target = folder / "results.json"
    results = results_file.read(target)
    if results is None:
        raise ConfigError(f"{target} does not exist: --check-bits checks a folder a study wrote (--out DIR)")
    runs = [
        (record, name, fingerprint)
        for record in results["results"]
        for name, fingerprint in sorted((record.get("fingerprints") or {}).items())
    ]
    if not runs:
        raise ConfigError(
            f"no cell of {target} recorded its runs' fingerprints (cells made before they existed, or rows "
            "that train nothing): there is nothing to compare bit for bit"
        )
    code = cells.code_digest()
    scratch = folder / "bit-check" / code
    if scratch.exists():
        shutil.rmtree(scratch)  # this check's own scratch runs, from an earlier check at this code
    verdicts = []
    started = time.time()
    log(f"bit check of {len(runs)} run(s) of {target}, first {steps} step(s) each, at code {code}")
    for record, name, recorded in runs:
        config_file = folder / "runs" / name / "config.yaml"
        cell = f"{record['row']} seed {record['seed']}"
        if not config_file.is_file():
            verdicts.append({"cell": [record["row"], record["seed"]], "run": name, "same": None, "where": "no config"})
            log(f"  {cell}, run {name}: not checked ({config_file} is missing)")
            continue
        config = load_config(config_file, [f"output_dir={scratch}", "train.resume="])
        base = (record.get("run_bases") or {}).get(name)
        replay = train(config, model_path=base, progress=False, first_steps=steps)
        now = _read_fingerprint(replay)
        compared = {
            "rollouts": {k: v for k, v in recorded.get("rollouts", {}).items() if int(k) <= steps},
            "complete": recorded.get("complete", True),
        }
        where = first_difference(compared, {"rollouts": now["rollouts"], "complete": True})
        verdicts.append({"cell": [record["row"], record["seed"]], "run": name, "same": where is None, "where": where})
        log(f"  {cell}, run {name}: " + ("bit-identical" if where is None else f"parted: {where}"))
    same = sum(1 for v in verdicts if v["same"])
    check = {
        "code": code,
        **provenance.commit(),
        "cpu": provenance.host_cpu(),
        "steps": steps,
        "runs": verdicts,
        "same": same,
        "seconds": time.time() - started,
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    results_file.update(target, results, lambda r: r.setdefault("bit_checks", []).append(check))
    log(f"bit check: {same} of {len(verdicts)} run(s) bit-identical over their first {steps} step(s)")
    return check


def _read_fingerprint(run_dir: Path) -> dict[str, Any]:
    return dict(json.loads((run_dir / "summary.json").read_text())["fingerprint"])
