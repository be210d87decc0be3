"""Split-Calc with a hostile teammate, as registered tasks, so that a whole training run plays against it.

    teamrl train src/teamrl/configs/split_calc_team.yaml task.module=teamrl.probes.hostile_tasks \\
        task.name=split_calc_hostile_analyst policy.model=<a warmed-up Split-Calc model folder>

Every response sampled for the hostile agent is replaced by its adversary's (`teamrl.probes.teammate`):
its candidates all score alike, so that role gets no gradient, and the other role trains against it.
"""

from __future__ import annotations

from typing import Any

from teamrl.config.tasks import TASKS, register_task
from teamrl.probes.teammate import ADVERSARIES, WithAdversary
from teamrl.tasks.split_calc import SplitCalcConfig
from teamrl.workflows.split_calc_team import SplitCalcWorkflow


def _hostile(agent: str) -> Any:
    def build(settings: SplitCalcConfig, max_turns: int = 1, prompt_style: str = "compact") -> WithAdversary:
        workflow = SplitCalcWorkflow(settings, max_turns=max_turns, prompt_style=prompt_style)
        return WithAdversary(workflow, agent, ADVERSARIES["split_calc"][agent])

    return build


for _agent in ADVERSARIES["split_calc"]:
    if f"split_calc_hostile_{_agent}" not in TASKS:  # importing twice registers once
        register_task(f"split_calc_hostile_{_agent}", workflow=_hostile(_agent), settings=SplitCalcConfig)
