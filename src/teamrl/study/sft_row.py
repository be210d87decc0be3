"""The study's `sft` row: offline SFT on strong scripted transcripts (MAPoRL's baseline), vs RL.

Per seed, from the seed's warm-up: the task's strong scripted team (`teamrl.demos.strong`) plays
`train.steps * train.batch_size` training instances, as many as RL's training batches hold, one
episode each (its solved ones are kept: all of them, for a strong script); the config's policies
are fine-tuned on those turns for `train.steps` optimizer steps, each on `train.batch_size`
episodes' turns, so SFT takes as many steps and sees each instance about once, as RL does. RL
samples `k` candidates at every agent turn of those instances; SFT samples nothing. The fine-tuned
policies are scored on the test split like every other row (no checkpoint picking: SFT keeps its
last weights, so the validation split is not used).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from teamrl.setup.team import build_workflow
from teamrl.training.offline_sft import OfflineSFT, offline_sft
from teamrl.training.transcript_file import write_transcripts
from teamrl.training.transcript_sources import scripted_transcripts

if TYPE_CHECKING:
    from teamrl.study.rows import Row
    from teamrl.study.seed_run import SeedRun

SFT_LR = 1e-3
"""The row's peak SFT learning rate (`teamrl sft`'s default)."""


def sft_row(seed_run: "SeedRun", row: "Row") -> dict[str, Any]:
    """Make the seed's transcript file, fine-tune from the seed's warm-up, score on the test split."""
    config = seed_run.config(row)
    agents = len(build_workflow(config).agents)
    tcfg = config.train
    episodes = tcfg.steps * tcfg.batch_size
    records = scripted_transcripts(config, episodes, only_successes=True)
    transcripts = write_transcripts(seed_run.out / "runs" / f"{config.run_name}.jsonl", records)
    stale = Path(config.output_dir) / config.run_name
    if stale.is_dir():  # the study stopped during this row: keep that folder, aside
        stale.rename(stale.with_name(f"{stale.name}.stopped-{int(time.time())}"))
    options = OfflineSFT(steps=tcfg.steps, batch_size=tcfg.batch_size * agents, lr=SFT_LR)
    run_dir = offline_sft(config, records, options, model_path=seed_run.model_path)
    budget = {
        "transcript_episodes": len({r.episode for r in records}),
        "transcript_turns": len(records),
        "sft_steps": options.steps,
        "sft_batch_turns": options.batch_size,
        "sft_lr": options.lr,
        "rl_steps": tcfg.steps,
        "rl_instances": episodes,
        "rl_sampled_responses_per_agent_turn": config.algorithm.k,
    }
    return seed_run.test(row, (), run_dir / "checkpoints" / "best") | {
        "budget": budget,
        "transcripts": str(transcripts),
        "run_dir": str(run_dir),
    }
