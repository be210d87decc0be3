"""Task name -> its settings dataclass, its team/single workflows and its scripted demonstrations.

A config names a task (`task.name: plan_path`) and sets its fields; the entry here turns that into a
typed, validated settings object and a workflow. A user's own task registers an entry the same way.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import importlib.util
import inspect
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from teamrl.tasks.plan_path import PlanPathConfig
from teamrl.tasks.sokoban import SokobanConfig
from teamrl.tasks.sudoku import SudokuConfig
from teamrl.demos import code as code_demos, driver as demo_driver, math as math_demos, planning as planning_demos
from teamrl.demos import plan_path as plan_path_demos
from teamrl.workflows.base import Prompt, Workflow, with_hook_defaults
from teamrl.demos.driver import Respond
from teamrl.workflows.code_team import CodeTaskConfig, CodeWorkflow
from teamrl.workflows.math_team import MathTaskConfig, MathWorkflow
from teamrl.workflows.plan_path_team import PlanPathWorkflow
from teamrl.workflows.sokoban_team import SokobanWorkflow
from teamrl.workflows.sudoku_team import SudokuWorkflow
from teamrl.workflows.tool_plan import ToolPlanWorkflow
from teamrl.workflows.flow_kinds import FLOW_SOURCES, FLOW_KINDS
from teamrl.demos.flows import with_flow_demos
from teamrl.demos import split_calc as split_calc_demos, split_nav as split_nav_demos
from teamrl.tasks.split_calc import SplitCalcConfig
from teamrl.tasks.split_nav import SplitNavConfig
from teamrl.workflows.split_calc_team import SplitCalcWorkflow
from teamrl.workflows.split_nav_team import SplitNavWorkflow
from teamrl.demos import calc_flows as calc_flows_demos
from teamrl.workflows.calc_flows import CALC_FLOWS, CalcFlowsConfig

Demos = Callable[[Workflow, int], Iterator[tuple[str, Prompt, str]]]
W = TypeVar("W", bound=Workflow)


def demos_of(kind: type[W], play: Callable[[W, int], Iterator[tuple[str, Prompt, str]]]) -> Demos:
    """`play`, scripted demonstrations of `kind` workflows, as a task's `Demos`: the registry hands
    demos the workflow its task built; any other workflow is refused with a clear error."""

    def demos(workflow: Workflow, seed: int) -> Iterator[tuple[str, Prompt, str]]:
        if not isinstance(workflow, kind):
            raise TypeError(
                f"these scripted demonstrations play {kind.__name__} workflows, got {type(workflow).__name__}"
            )
        return play(workflow, seed)

    return demos


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
    single: bool = True
    """Whether `workflow(settings, single_agent=True, ...)` builds the single-agent baseline."""

    def build(self, kind: str, settings: Any, **kwargs: Any) -> Workflow:
        """The workflow `kind`: team (the task's own team), single (its single agent), or an extra kind;
        every optional hook it leaves out has `Workflow`'s default (`with_hook_defaults`)."""
        if kind in ("team", "single"):
            return with_hook_defaults(self.workflow(settings, single_agent=kind == "single", **kwargs))
        if kind not in self.workflows:
            kinds = ", ".join(["team", "single", *sorted(self.workflows)])
            raise ValueError(f"workflow {kind!r} is not defined for this task; available: {kinds}")
        return with_hook_defaults(self.workflows[kind](settings, **kwargs))


TASKS: dict[str, TaskEntry] = {
    "plan_path": TaskEntry(
        PlanPathConfig,
        PlanPathWorkflow,
        demos_of(
            PlanPathWorkflow, lambda wf, seed: plan_path_demos.demonstrations(wf, seed, plan_path_demos.ScriptedSkill())
        ),
        sources=(
            "teamrl.demos.plan_path",
            "teamrl.workflows.plan_path_team",
            "teamrl.workflows.tool_plan",
            "teamrl.tasks.plan_path",
            "teamrl.tasks.plan_parsing",
            "teamrl.tasks.code_blocks",
        ),
    ),
    "sokoban": TaskEntry(
        SokobanConfig,
        SokobanWorkflow,
        demos_of(
            ToolPlanWorkflow, lambda wf, seed: planning_demos.demonstrations(wf, seed, planning_demos.PlanningSkill())
        ),
        sources=(
            "teamrl.demos.planning",
            "teamrl.workflows.sokoban_team",
            "teamrl.workflows.tool_plan",
            "teamrl.tasks.sokoban",
            "teamrl.tasks.sokoban_rooms",
            "teamrl.tasks.plan_parsing",
            "teamrl.tasks.code_blocks",
        ),
    ),
    "sudoku": TaskEntry(
        SudokuConfig,
        SudokuWorkflow,
        demos_of(
            ToolPlanWorkflow, lambda wf, seed: planning_demos.demonstrations(wf, seed, planning_demos.PlanningSkill())
        ),
        sources=(
            "teamrl.demos.planning",
            "teamrl.workflows.sudoku_team",
            "teamrl.workflows.tool_plan",
            "teamrl.tasks.sudoku",
            "teamrl.tasks.sudoku_grid",
            "teamrl.tasks.plan_parsing",
            "teamrl.tasks.code_blocks",
        ),
    ),
    # The scripted math / code agents play procedural sources only (arithmetic; procedural
    # add,sub,mul,affine); other sources train a model given by path (policy.model).
    "math": TaskEntry(
        MathTaskConfig,
        MathWorkflow,
        with_flow_demos(
            demos_of(MathWorkflow, lambda wf, seed: math_demos.demonstrations(wf, seed, math_demos.MathSkill()))
        ),
        sources=(
            "teamrl.demos.math",
            "teamrl.demos.driver",
            "teamrl.workflows.math_team",
            "teamrl.tasks.math_data",
            "teamrl.tasks.math_answers",
        )
        + FLOW_SOURCES,
        workflows=dict(FLOW_KINDS),
    ),
    "code": TaskEntry(
        CodeTaskConfig,
        code_demos.code_workflow,
        with_flow_demos(
            demos_of(CodeWorkflow, lambda wf, seed: code_demos.demonstrations(wf, seed, code_demos.CodeSkill()))
        ),
        sources=(
            "teamrl.demos.code",
            "teamrl.demos.driver",
            "teamrl.workflows.code_team",
            "teamrl.workflows.code_parsing",
            "teamrl.workflows.code_sources",
            "teamrl.tasks.code_procedural",
        )
        + FLOW_SOURCES,
        workflows=dict(FLOW_KINDS),
    ),
    # The study's tasks (docs/study/index.md): each role sees half of the state; broad scripted priors.
    "split_nav": TaskEntry(
        SplitNavConfig,
        SplitNavWorkflow,
        demos_of(SplitNavWorkflow, split_nav_demos.demonstrations),
        sources=(
            "teamrl.demos.split_nav",
            "teamrl.demos.driver",
            "teamrl.workflows.split_nav_team",
            "teamrl.tasks.split_nav",
            "teamrl.tasks.content_splits",
            "teamrl.tasks.plan_path",
        ),
    ),
    "split_calc": TaskEntry(
        SplitCalcConfig,
        SplitCalcWorkflow,
        demos_of(SplitCalcWorkflow, split_calc_demos.demonstrations),
        sources=(
            "teamrl.demos.split_calc",
            "teamrl.demos.driver",
            "teamrl.workflows.split_calc_team",
            "teamrl.tasks.split_calc",
            "teamrl.tasks.content_splits",
        ),
    ),
    # The study workflows on Split-Calc content (docs/howto/study-workflows.md); `team` is voting.
    "calc_flows": TaskEntry(
        CalcFlowsConfig,
        CALC_FLOWS["voting"],
        calc_flows_demos.demonstrations,
        sources=(
            "teamrl.demos.calc_flows",
            "teamrl.demos.split_calc",
            "teamrl.demos.driver",
            "teamrl.workflows.calc_flows",
            "teamrl.tasks.split_calc",
            "teamrl.tasks.content_splits",
        )
        + FLOW_SOURCES[1:],
        workflows=dict(CALC_FLOWS),
        single=False,
    ),
}


def register_task(
    name: str,
    entry: TaskEntry | None = None,
    *,
    workflow: Callable[..., Workflow] | None = None,
    settings: type | None = None,
    script: Respond | None = None,
    demos: Demos | None = None,
    single_agent: Callable[..., Workflow] | None = None,
    workflows: dict[str, Callable[..., Workflow]] | None = None,
) -> TaskEntry:
    """Add a task that `task.name: <name>` selects; returns its entry. Names are unique.

    Either a ready `TaskEntry`, or (the usual way) keyword arguments:
      workflow:     builds the team workflow: a class or function taking the settings object (or
                    nothing); keyword arguments it declares among max_turns, prompt_style,
                    format_bonus and runner are passed, and `workflow.max_turns` from the config is set
                    on the built workflow when it does not take it.
      settings:     a dataclass of the task's own config keys (`task.<key>`); none: no keys.
      script:       `respond(agent, state, rng) -> response`, scripted agents whose episodes warm up the
                    tiny default model (`policy.model: tiny-default`); without it, set policy.model.
      demos:        instead of script: `demos(workflow, seed)` yielding (agent, prompt, response) forever.
      single_agent: builds the single-agent baseline (`workflow.name: single`), like `workflow`.
      workflows:    further workflow kinds by name (`workflow.name: <kind>`), like `workflow`.
    Put the call in a module and name it in the config (`task.module: my_pkg.tasks` or a .py path).
    """
    if entry is not None and not isinstance(entry, TaskEntry):
        kind = entry.__name__ if isinstance(entry, type) else type(entry).__name__
        raise TypeError(
            f"register_task({name!r}, {kind}): the second argument must be a TaskEntry; to register a "
            f"workflow, call register_task({name!r}, workflow=YourWorkflow, settings=YourSettings)"
        )
    if entry is None:
        entry = _entry_from_parts(name, workflow, settings, script, demos, single_agent, workflows or {})
    elif any(v is not None for v in (workflow, settings, script, demos, single_agent, workflows)):
        raise TypeError(f"register_task({name!r}, entry, ...): give a TaskEntry or keyword arguments, not both")
    if name in TASKS:
        raise ValueError(f"task {name!r} is already registered; choose another name")
    TASKS[name] = entry
    return entry


@dataclass
class NoSettings:
    """A task without settings of its own."""


def _entry_from_parts(
    name: str,
    workflow: Callable[..., Workflow] | None,
    settings: type | None,
    script: Respond | None,
    demos: Demos | None,
    single_agent: Callable[..., Workflow] | None,
    workflows: dict[str, Callable[..., Workflow]],
) -> TaskEntry:
    if workflow is None or not callable(workflow):
        raise TypeError(
            f"register_task({name!r}): workflow= must be the class or function that builds the team workflow"
        )
    if settings is not None and not dataclasses.is_dataclass(settings):
        raise TypeError(
            f"register_task({name!r}): settings= must be a dataclass (its fields are the task.<key> "
            f"config keys), got {settings!r}"
        )
    if script is not None and demos is not None:
        raise TypeError(f"register_task({name!r}): give script= or demos=, not both")
    if script is not None:
        demos = lambda wf, seed: demo_driver.demonstrations(wf, seed, script)  # noqa: E731
    team_builder = adapt_factory(workflow)
    single_builder = adapt_factory(single_agent) if single_agent is not None else None

    def build(task_settings: Any, single_agent: bool = False, **kwargs: Any) -> Workflow:
        if single_agent:
            if single_builder is None:
                raise ValueError(
                    f"task {name!r} has no single-agent workflow; register one with "
                    "register_task(..., single_agent=...) or use workflow.name: team"
                )
            return single_builder(task_settings, **kwargs)
        return team_builder(task_settings, **kwargs)

    # The warm-up cache key hashes these modules: editing the user's workflow or scripts retrains it.
    parts = (workflow, settings, script, demos, single_agent, *workflows.values())
    sources = tuple(dict.fromkeys(m.__name__ for m in map(inspect.getmodule, filter(None, parts)) if m is not None))
    return TaskEntry(
        settings or NoSettings,
        build,
        demos,
        sources=sources,
        workflows={k: adapt_factory(f) for k, f in workflows.items()},
        single=single_agent is not None,
    )


def adapt_factory(factory: Callable[..., Workflow]) -> Callable[..., Workflow]:
    """A user's workflow factory in the registry's calling convention.

    The registry builds workflows as `factory(settings, max_turns=, prompt_style=, format_bonus=, runner=)`;
    a user's factory gets the settings only if it takes a positional parameter and only the keyword
    arguments it declares, and a `max_turns` it does not take is set on the workflow it returns (so
    `workflow.max_turns` in the config is never silently ignored).
    """
    params = inspect.signature(factory).parameters.values()
    takes_all = any(p.kind is p.VAR_KEYWORD for p in params)
    named = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)]

    def build(settings: Any, **kwargs: Any) -> Workflow:
        given = kwargs if takes_all else {k: v for k, v in kwargs.items() if k in named}
        args = (settings,) if positional and not (len(positional) == 1 and positional[0].name in given) else ()
        workflow = factory(*args, **given)
        if "max_turns" in kwargs and "max_turns" not in given:
            workflow.max_turns = kwargs["max_turns"]
        return workflow

    return build


def load_task_module(spec: str) -> None:
    """Import the module that registers a user's task: a dotted module name, or a path to a .py file."""
    if spec.endswith(".py") or "/" in spec or os.sep in spec:
        path = Path(spec).expanduser().resolve()
        if not path.is_file():
            raise ValueError(f"task.module {spec!r}: no such file ({path}); give a .py file or a dotted module name")
        module_name = f"teamrl_user_task_{hashlib.sha256(str(path).encode()).hexdigest()[:12]}"
        if module_name in sys.modules:
            return  # imported already: its register_task calls ran once
        module_spec = importlib.util.spec_from_file_location(module_name, path)
        if module_spec is None or module_spec.loader is None:  # a file Python cannot import (not .py)
            raise ValueError(
                f"task.module {spec!r}: {path} is not a Python module; give a .py file or a dotted module name"
            )
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[module_name] = module
        try:
            module_spec.loader.exec_module(module)
        except Exception:
            del sys.modules[module_name]
            raise
        return
    try:
        importlib.import_module(spec)
    except ModuleNotFoundError as err:
        raise ValueError(
            f"task.module {spec!r} could not be imported ({err}); give a module importable from "
            "here (check PYTHONPATH or pip install your package) or a path to a .py file"
        ) from err


def task_entry(name: str) -> TaskEntry:
    if name not in TASKS:
        raise KeyError(f"unknown task {name!r}; registered tasks: {', '.join(sorted(TASKS))}")
    return TASKS[name]


def task_settings(task: dict[str, Any]) -> Any:
    """The typed settings of a `task:` config section ({'name': ..., 'module': ..., field: value, ...}).

    `module` (optional) names the module that registers a user's task; it is imported first.
    """
    params = dict(task)
    name = params.pop("name", None)
    module = params.pop("module", None)
    if module is not None:
        if not isinstance(module, str) or not module:
            raise ValueError(f"task.module = {module!r} must be a dotted module name or a path to a .py file")
        load_task_module(module)
    if not name:
        raise ValueError(f"task.name is missing; registered tasks: {', '.join(sorted(TASKS))}")
    if name not in TASKS and module is not None:
        raise ValueError(
            f"task.module {module!r} was imported but registered no task named {name!r}; "
            f"registered tasks: {', '.join(sorted(TASKS))}"
        )
    entry = task_entry(name)
    fields = {f.name for f in dataclasses.fields(entry.settings)}
    unknown = sorted(set(params) - fields)
    if unknown:
        raise ValueError(
            f"unknown key(s) {', '.join('task.' + k for k in unknown)} for task {name!r}; "
            f"valid keys: name, {', '.join(sorted(fields))}"
        )
    return entry.settings(**params)
