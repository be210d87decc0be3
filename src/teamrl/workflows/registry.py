"""Task name -> its settings dataclass, its team/single workflows and its scripted demonstrations.

A config names a task (`task.name: plan_path`) and sets its fields; the entry here turns that into a
typed, validated settings object and a workflow. A user's own task registers an entry the same way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from teamrl.tasks.plan_path import PlanPathConfig
from teamrl.tasks.sokoban import SokobanConfig
from teamrl.tasks.sudoku import SudokuConfig
from teamrl.workflows import code_demos, math_demos, planning_demos, plan_path_demos
from teamrl.workflows.base import Workflow
from teamrl.workflows.code_team import CodeTaskConfig
from teamrl.workflows.math_team import MathTaskConfig, MathWorkflow
from teamrl.workflows.plan_path_team import PlanPathWorkflow
from teamrl.workflows.sokoban_team import SokobanWorkflow
from teamrl.workflows.sudoku_team import SudokuWorkflow
from teamrl.workflows.study import STUDY_SOURCES, STUDY_WORKFLOWS
from teamrl.workflows.study_demos import with_study_demos

Demos = Callable[[Workflow, int], Iterator[tuple[str, str, str]]]


@dataclass(frozen=True)
class TaskEntry:
    """How to build one task's workflows."""

    settings: type
    """The task's config dataclass (validates its own fields)."""
    workflow: Callable[..., Workflow]
    """(settings, max_turns=, single_agent=, prompt_style=, format_bonus=, runner=) -> Workflow."""
    demos: Demos | None = None
    """Scripted (agent, prompt, response) triples for warming up the tiny default model."""
    sources: tuple[str, ...] = ()
    """Modules whose code shapes the demonstrations (demos, workflow, environment or data, parsing);
    hashed, with the tiny model's builder, into the warm-up cache key, so editing any of them
    retrains the warm-up and editing another task's modules does not."""
    workflows: dict[str, Callable[..., Workflow]] = dataclasses.field(default_factory=dict)
    """Further workflow kinds of this task by name (e.g. voting), built like `workflow`."""

    def build(self, kind: str, settings: Any, **kwargs: Any) -> Workflow:
        """The workflow `kind`: team (the task's own team), single (its single agent), or an extra kind."""
        if kind in ("team", "single"):
            return self.workflow(settings, single_agent=kind == "single", **kwargs)
        if kind not in self.workflows:
            kinds = ", ".join(["team", "single", *sorted(self.workflows)])
            raise ValueError(f"workflow {kind!r} is not defined for this task; available: {kinds}")
        return self.workflows[kind](settings, **kwargs)


TASKS: dict[str, TaskEntry] = {
    "plan_path": TaskEntry(
        PlanPathConfig, PlanPathWorkflow,
        lambda wf, seed: plan_path_demos.demonstrations(wf, seed, plan_path_demos.ScriptedSkill()),
        sources=("teamrl.workflows.plan_path_demos", "teamrl.workflows.plan_path_team", "teamrl.workflows.tool_plan",
                 "teamrl.tasks.plan_path", "teamrl.tasks.parsing")),
    "sokoban": TaskEntry(
        SokobanConfig, SokobanWorkflow,
        lambda wf, seed: planning_demos.demonstrations(wf, seed, planning_demos.PlanningSkill()),
        sources=("teamrl.workflows.planning_demos", "teamrl.workflows.sokoban_team", "teamrl.workflows.tool_plan",
                 "teamrl.tasks.sokoban", "teamrl.tasks.sokoban_rooms", "teamrl.tasks.parsing")),
    "sudoku": TaskEntry(
        SudokuConfig, SudokuWorkflow,
        lambda wf, seed: planning_demos.demonstrations(wf, seed, planning_demos.PlanningSkill()),
        sources=("teamrl.workflows.planning_demos", "teamrl.workflows.sudoku_team", "teamrl.workflows.tool_plan",
                 "teamrl.tasks.sudoku", "teamrl.tasks.parsing")),
    # The scripted math / code agents play procedural sources only (arithmetic; procedural
    # add,sub,mul,affine); other sources train a model given by path (policy.model).
    "math": TaskEntry(
        MathTaskConfig, MathWorkflow,
        with_study_demos(lambda wf, seed: math_demos.demonstrations(wf, seed, math_demos.MathSkill())),
        sources=("teamrl.workflows.math_demos", "teamrl.workflows.demo_driver", "teamrl.workflows.math_team",
                 "teamrl.tasks.math_data", "teamrl.tasks.math_answers") + STUDY_SOURCES,
        workflows=dict(STUDY_WORKFLOWS)),
    "code": TaskEntry(
        CodeTaskConfig, code_demos.code_workflow,
        with_study_demos(lambda wf, seed: code_demos.demonstrations(wf, seed, code_demos.CodeSkill())),
        sources=("teamrl.workflows.code_demos", "teamrl.workflows.demo_driver", "teamrl.workflows.code_team",
                 "teamrl.workflows.code_parsing", "teamrl.workflows.code_sources",
                 "teamrl.tasks.code_procedural") + STUDY_SOURCES,
        workflows=dict(STUDY_WORKFLOWS)),
}


def register_task(name: str, entry: TaskEntry) -> None:
    """Add a user task; names are unique."""
    if name in TASKS:
        raise ValueError(f"task {name!r} is already registered")
    TASKS[name] = entry


def task_entry(name: str) -> TaskEntry:
    if name not in TASKS:
        raise KeyError(f"unknown task {name!r}; registered tasks: {', '.join(sorted(TASKS))}")
    return TASKS[name]


def task_settings(task: dict[str, Any]) -> Any:
    """The typed settings of a `task:` config section ({'name': ..., field: value, ...})."""
    params = dict(task)
    name = params.pop("name", None)
    if not name:
        raise ValueError(f"task.name is missing; registered tasks: {', '.join(sorted(TASKS))}")
    entry = task_entry(name)
    fields = {f.name for f in dataclasses.fields(entry.settings)}
    unknown = sorted(set(params) - fields)
    if unknown:
        raise ValueError(f"unknown key(s) {', '.join('task.' + k for k in unknown)} for task {name!r}; "
                         f"valid keys: name, {', '.join(sorted(fields))}")
    return entry.settings(**params)
