"""results.json updates from several processes at once keep every record (the --jobs path)."""

import json
import multiprocessing

from teamrl.study import results_file

FRESH = {"study": "demo", "results": [], "seconds": 0.0}


def _add_many(target: str, seed: int, count: int) -> None:
    from pathlib import Path

    for i in range(count):
        record = {"row": f"row{i}", "seed": seed, "seconds": 1.0}
        results_file.update(Path(target), FRESH, lambda results, record=record: results_file.add_record(results, record))


def test_concurrent_writers_keep_every_record(tmp_path):
    target = tmp_path / "results.json"
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=_add_many, args=(str(target), seed, 25)) for seed in range(3)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
        assert worker.exitcode == 0
    results = json.loads(target.read_text())
    assert len(results["results"]) == 75
    assert results["seconds"] == 75.0
    assert not list(tmp_path.glob("*.tmp"))  # every partial file was renamed into place


def test_a_record_of_the_same_row_and_seed_replaces_the_old_one(tmp_path):
    target = tmp_path / "results.json"
    for seconds in (3.0, 5.0):
        record = {"row": "team", "seed": 0, "seconds": seconds}
        results_file.update(target, FRESH, lambda results, record=record: results_file.add_record(results, record))
    results = json.loads(target.read_text())
    assert results["results"] == [{"row": "team", "seed": 0, "seconds": 5.0}] and results["seconds"] == 5.0
    assert FRESH["results"] == []  # the template is copied, never changed


def test_the_table_says_where_the_seeds_start():
    from teamrl.study.table import starting_point
    assert starting_point({"study": "split_calc", "overrides": []}) == "each seed warms up its own base."
    real = starting_point({"study": "real_split_calc", "overrides": ["train.threads=1"]})
    assert "same pretrained weights (policy.model=smollm2-135m-instruct" in real
    # the user's model replaces the study's
    assert "policy.model=/m" in starting_point({"study": "real_split_calc", "overrides": ["policy.model=/m"]})
    assert starting_point({"study": "real_split_calc", "overrides": ["policy.model=tiny-default"]}).startswith("each")
    # a row's own model beats the study's: the Gemma-only flows table is not SmolLM2's
    assert "policy.model=gemma-3-270m" in starting_point({"study": "real_flows_gemma", "overrides": []})
    hetero = starting_point({"study": "real_hetero_calc", "overrides": [], "rows": ["per_role", "hetero", "homo_b"]})
    assert "per_role: smollm2-135m-instruct; hetero: smollm2-135m-instruct and gemma-3-270m, by role" in hetero
    assert "homo_b: gemma-3-270m)" in hetero
    scale = starting_point({"study": "real_scale_calc", "overrides": []})
    assert "scale_tiny: tiny-default; scale_smollm2: smollm2-135m-instruct; scale_gemma: gemma-3-270m" in scale
