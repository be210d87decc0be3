"""The study's `sft` row end to end on a tiny budget: transcripts, SFT from the seed's warm-up, test score."""

import json

from teamrl.cli import main
from teamrl.training.transcript_file import read_transcripts


def test_quick_sft_row_beside_the_shared_row(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TEAMRL_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "study"
    code = main(["study", "split_calc", "--quick", "--instances", "3", "--out", str(out),
                 "policy.warmup_sft_steps=2", "train.steps=2", "train.batch_size=3", "algorithm.k=2",
                 "train.eval_every=1", "--rows", "shared", "sft"])
    assert code == 0, capsys.readouterr().err
    results = json.loads((out / "results.json").read_text())
    sft = next(r for r in results["results"] if r["row"] == "sft")
    shared = next(r for r in results["results"] if r["row"] == "shared")
    assert 0.0 <= sft["test_success"] <= 1.0
    # Budget: as many transcripts as RL's training instances (steps x batch), as many optimizer steps.
    assert sft["budget"] | {"sft_lr": None} == {
        "transcript_episodes": 6, "transcript_turns": 12, "sft_steps": 2, "sft_batch_turns": 6, "sft_lr": None,
        "rl_steps": 2, "rl_instances": 6, "rl_sampled_responses_per_agent_turn": 2}
    records = read_transcripts(out / "runs" / "sft-s0.jsonl")
    assert {r.split for r in records} == {"train"} and all(r.success for r in records)
    # Both rows start from the same warm-up; the SFT run folder has the training runs' layout.
    sft_config = (out / "runs" / "sft-s0" / "config.yaml").read_text()
    assert (out / "runs" / "sft-s0" / "checkpoints" / "best" / "shared" / "config.json").is_file()
    assert "heldout_split: validation" in sft_config and shared["warmup_seed"] == sft["warmup_seed"]
    table = (out / "table.md").read_text()
    assert "offline SFT on strong scripted transcripts" in table and "RL vs offline SFT" in table
