"""The `program` task: a team written as an ordinary program (plain openai client, LangGraph, ...)
trained through the gateway.

    task:
      name: program
      module: teamrl.gateway          # registers the task
      entry: my_team:run_episode      # run_episode(instance, endpoint) -> reward
      agents: [planner, solver]

For every task instance the training step runs the program K times (algorithm.k), each run with its
own endpoint; the calls of the K runs are grouped by (instance, agent, that agent's call index) and
trained with the usual AT-GRPO advantages and PPO update. Held-out evaluation runs it once per instance.

Tree sampling (algorithm.grouping: tree, task.branching: replay) follows AT-GRPO's "commit and
continue", level by level, all instances together (each level's runs are batched):
- level 0: K runs per instance play freely; their first calls are the group;
- each level's group is scored by each member's own run's reward (`call_sample`: team and that agent's
  own reward), and the best member's run is committed (`algorithm.commit`: greedy argmax, ties by the
  seeded rng): its calls up to and including this level's become the instance's committed prefix;
- level j: K runs replay the committed prefix from the record (no sampling) and sample anew from call
  j on; their call j (same prefix, so the same prompt) is the group;
- an instance stops when its committed run made no further call. Every member of every group is a
  training sample (`committed` marks the chosen one); the runs' later calls only feed their reward.
  The instance's Episode is its last committed run.

Determinism check: after level 0, one run per instance is played again with all its responses
replayed. A program whose prompts then differ is not deterministic given its responses, and
branching from a replayed prefix would be wrong for it: that instance is trained on its K level-0
runs as independent ones (trajectory-level groups), logged in train.log and counted in
`gateway/nondeterministic_runs`.
"""

from __future__ import annotations

import itertools
import logging
import random
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import torch

from teamrl.gateway.batching import SamplingWorker
from teamrl.gateway.grouping import FinishedRun, episode_record, group_checks, to_records
from teamrl.gateway.replay_tree import CommittedLine, finished_runs, runs_by_instance
from teamrl.gateway.runs import Endpoint, Program, RunOutcome, call_program, command_program, load_callable
from teamrl.gateway.server import AgentRoute, Gateway, GatewayLimits
from teamrl.gateway.sessions import Call, EpisodeSession
from teamrl.gateway.tool_calls import tool_call_parser
from teamrl.policies.loading import Policy
from teamrl.rollout.builtin_engine import SamplingParams
from teamrl.rollout.tree import Episode, RewardWeights, Sample
from teamrl.workflows.base import Agent, Outcome, Workflow

log = logging.getLogger("teamrl.gateway")


@dataclass
class ProgramSettings:
    """The `task:` keys of a program team."""

    entry: str = ""
    """module:function playing one episode: `run_episode(instance, endpoint) -> reward` (sync or async)."""
    command: str = ""
    """Instead of entry: a command line run per episode (endpoint in OPENAI_BASE_URL / OPENAI_API_KEY,
    the instance as JSON on stdin; its last stdout line is the result as JSON)."""
    agents: list[str] = field(default_factory=list)
    """The agent names the program asks for (the `model` of its requests), in speaking order."""
    roles: dict[str, str] = field(default_factory=dict)
    """Agent name -> role (default: the name itself); roles map to policies through the regime."""
    instances: str = ""
    """module:function `instances(split, index) -> instance` handed to the program; default
    {"split": split, "index": index}."""
    timeout_s: float = 120.0
    """Wall-clock limit of one run; a slower run is dropped."""
    max_concurrent: int = 32
    """Runs at once (all runs of a step are queued; this many play at the same time)."""
    batch_window_ms: float = 20.0
    """The quiet window that closes a batch of requests made outside the step's runs; a step's own requests
    are batched by the runs that are playing (`batch_straggler_ms`), so this only matters to requests
    that name no episode."""
    batch_straggler_ms: float = 2000.0
    """A step's requests are sampled once every running run has asked; this bounds how long they wait, after
    the latest request, answer, run start or end, for a run that has not (one busy in a slow tool, or hung)."""
    max_message_chars: int = 200_000
    """Limit on one request's messages (all characters together)."""
    script: str = ""
    """module:function (or file.py:function) `script(agent, messages) -> str`: scripted teammates whose
    episodes (your program played against them) warm up the tiny default model; without it give
    policy.model a model folder."""
    check_determinism: bool = True
    """Replay one run per instance per step and report programs whose prompts then differ."""
    tool_parser: str = "hermes"
    """Reads the tool calls out of the policies' answers to requests with `tools` (`teamrl.gateway.tool_calls`:
    hermes reads `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` blocks)."""
    branching: str = "replay"
    """With algorithm.grouping: tree. replay: AT-GRPO tree sampling (level by level, K runs that replay the
    committed calls and sample anew from the next one; the best of them is committed); independent: K
    independent runs per instance. Instances whose program is not deterministic given its responses
    fall back to independent runs."""

    def __post_init__(self) -> None:
        if bool(self.entry) == bool(self.command):
            raise ValueError("task.entry (module:function) or task.command (a command line): give exactly one")
        if not self.agents or not all(isinstance(a, str) and a for a in self.agents):
            raise ValueError(f"task.agents must list the agent names the program calls, got {self.agents!r}")
        unknown = sorted(set(self.roles) - set(self.agents))
        if unknown:
            raise ValueError(f"task.roles names agents {', '.join(unknown)} missing from task.agents {self.agents}")
        if self.branching not in ("replay", "independent"):
            raise ValueError(f"task.branching = {self.branching!r}: use replay or independent")
        try:
            tool_call_parser(self.tool_parser)
        except ValueError as err:
            raise ValueError(f"task.tool_parser: {err}") from None
        if self.timeout_s <= 0 or self.max_concurrent < 1 or self.batch_window_ms < 0 or self.batch_straggler_ms < 0:
            raise ValueError(
                "task.timeout_s must be > 0, task.max_concurrent >= 1, task.batch_window_ms >= 0 and "
                "task.batch_straggler_ms >= 0"
            )


def default_instances(split: str, index: int) -> dict[str, Any]:
    return {"split": split, "index": index}


class ProgramWorkflow(Workflow):
    """A Workflow whose episodes a user's program plays (`play_episodes`, called by `run_episodes`)."""

    parallel = False

    def __init__(self, settings: ProgramSettings, max_turns: int = 8) -> None:
        self.settings = settings
        self.max_turns = max_turns  # each agent's call limit per episode
        self.agents = [Agent(a, settings.roles.get(a, a)) for a in settings.agents]
        self.program: Program = (
            load_callable(settings.entry, "task.entry") if settings.entry else command_program(settings.command)
        )
        self.instances = (
            load_callable(settings.instances, "task.instances") if settings.instances else default_instances
        )
        self.gateway: Gateway | None = None
        self.last_metrics: dict[str, float] = {}

    # The turn-by-turn hooks are never called: run_episodes hands program workflows to play_episodes.
    def new_state(self, split: str, index: int) -> Any:
        return self.instances(split, index)

    def render(self, agent: str, state: Any) -> str:
        raise NotImplementedError("program episodes are played by the program itself (teamrl.gateway)")

    def apply(self, agent: str, state: Any, response: str) -> Outcome:
        raise NotImplementedError("program episodes are played by the program itself (teamrl.gateway)")

    def is_done(self, state: Any) -> bool:
        return True

    def success(self, state: Any) -> bool:
        return False

    def metrics(self) -> dict[str, float]:
        """The last rollout's gateway metrics (dropped runs, group checks, batching, determinism)."""
        return dict(self.last_metrics)

    def serve(
        self,
        policies: dict[str, Policy],
        agent_to_policy: dict[str, str],
        params_of: dict[str, SamplingParams],
        generator: torch.Generator,
    ) -> Gateway:
        """The gateway serving these policies (started on first use, re-pointed on later calls)."""
        routes = {
            a.name: AgentRoute(
                policies[agent_to_policy[a.name]], params_of[a.name], tool_parser=self.settings.tool_parser
            )
            for a in self.agents
        }
        if self.gateway is None:
            worker = SamplingWorker(
                generator, self.settings.batch_window_ms / 1000, straggler_s=self.settings.batch_straggler_ms / 1000
            )
            self.gateway = Gateway(routes, worker, GatewayLimits(self.settings.max_message_chars)).start()
        self.gateway.routes = routes
        _sampling_worker(self.gateway).generator = generator  # only the worker thread draws from it
        return self.gateway

    def play_episodes(
        self,
        instances: list[int],
        split: str,
        policies: dict[str, Policy],
        agent_to_policy: dict[str, str],
        params_of: dict[str, SamplingParams],
        branches: int,
        weights: RewardWeights,
        generator: torch.Generator,
        rng: random.Random,
        commit_rule: str = "greedy",
    ) -> tuple[list[Sample], list[Episode]]:
        """`branches` runs of the program per entry of `instances`; their calls as Samples and Episodes.

        rng, commit_rule: which tree-sampling candidate is committed (`algorithm.commit`; greedy ties by `rng`).
        """
        gateway = self.serve(policies, agent_to_policy, params_of, generator)
        calls_before, tools_before = len(_sampling_worker(gateway).batch_sizes), dict(gateway.tool_counts)
        roles = {a.name: a.role for a in self.agents}
        if branches > 1 and self.settings.branching == "replay" and split == "train":
            samples, episodes, metrics = self._play_tree(
                gateway, instances, branches, roles, agent_to_policy, weights, rng, commit_rule
            )
        else:
            plan = [index for index in instances for _ in range(branches)]
            played = self._play(gateway, plan, split, replay=None)
            finished = finished_runs(plan, played)
            metrics = self._drop_report(played, split)
            if split == "train" and self.settings.check_determinism:
                metrics.update(self._check_determinism(gateway, finished, split)[0])
            samples, episodes = to_records(finished, roles, agent_to_policy, weights)
        metrics.update(group_checks(samples))
        batches = _sampling_worker(gateway).batch_sizes[calls_before:]  # this rollout's engine calls and their sizes
        metrics["gateway/engine_calls"] = float(len(batches))
        metrics["gateway/mean_batch"] = sum(batches) / max(len(batches), 1)
        for outcome, count in gateway.tool_counts.items():  # answers to requests with tools, by what they held
            metrics[f"gateway/tool_calls/{outcome}"] = float(count - tools_before.get(outcome, 0))
        self.last_metrics = metrics
        return samples, episodes

    def _play_tree(
        self,
        gateway: Gateway,
        instances: list[int],
        k: int,
        roles: dict[str, str],
        agent_to_policy: dict[str, str],
        weights: RewardWeights,
        rng: random.Random,
        commit_rule: str,
    ) -> tuple[list[Sample], list[Episode], dict[str, float]]:
        """AT-GRPO tree sampling by replay, level by level, all instances together (module docstring)."""
        plan = [index for index in instances for _ in range(k)]
        played = self._play(gateway, plan, "train", replay=None)  # level 0: K free runs per instance
        metrics = self._drop_report(played, "train")
        finished = finished_runs(plan, played)
        check, differing = self._check_determinism(gateway, finished, "train")
        metrics.update(check)
        # An instance whose replay differed trains on its K level-0 runs as K independent episodes.
        samples, episodes = to_records(
            [run for run in finished if run.instance in differing], roles, agent_to_policy, weights
        )
        lines: dict[int, CommittedLine] = {}
        levels, branch_runs, branch_drops = 0, 0, {"gateway/dropped_runs_branches": 0.0}
        while True:
            levels += 1
            going: list[CommittedLine] = []  # the lines that committed a call at this level and have a next one
            for index, runs in runs_by_instance(plan, played, exclude=differing).items():
                if index not in lines:  # level 0: the instance's first finished run until one is committed
                    lines[index] = CommittedLine(len(episodes) + len(lines), runs[0])
                group = lines[index].commit(runs, roles, agent_to_policy, weights, rng, commit_rule)
                samples += group
                if group and lines[index].next_key() is not None:
                    going.append(lines[index])
            if not going:
                break
            # The next level: K runs per line replaying its committed prefix and sampling anew from the next call.
            plan = [line.run.instance for line in going for _ in range(k)]
            played = self._play(gateway, plan, "train", replay=[line.prefix() for line in going for _ in range(k)])
            branch_runs += len(plan)
            for key, value in self._drop_report(played, "train").items():
                if key.startswith("gateway/dropped"):
                    branch_drops[f"{key}_branches"] = branch_drops.get(f"{key}_branches", 0.0) + value
        episodes += [episode_record(line.run, weights) for line in lines.values()]
        metrics.update(branch_drops)
        metrics.update(
            {
                "gateway/branch_runs": float(branch_runs),
                "gateway/levels": float(levels),
                "gateway/fallback_instances": float(len(differing)),
            }
        )
        return samples, episodes, metrics

    def _play(
        self, gateway: Gateway, plan: list[int], split: str, replay: list[list[Call]] | None
    ) -> list[tuple[EpisodeSession, RunOutcome]]:
        """Run the program once per entry of `plan` (run i answers from `replay[i]`'s calls where they match)."""
        limit = self.settings.max_concurrent
        names = frozenset(a.name for a in self.agents)
        sessions = [gateway.sessions.open(index, names, self.max_turns) for index in plan]
        for session, earlier in zip(sessions, replay or []):
            session.replay = {(c.agent, c.index): c for c in earlier}
        # Sample as soon as every running program has asked, however long its client takes to connect: K
        # lock-step runs cost one call per turn (`batching`, "Episodes"). The worker learns which runs play
        # before they can ask: the first `limit` now, each later one as the run whose place it takes ends
        # (the pool starts queued runs in order, so that is the next in `plan`).
        worker = _sampling_worker(gateway)
        worker.episode_started(*(s.id for s in sessions[:limit]))
        ended = itertools.count()

        def run(i: int) -> RunOutcome:
            session = sessions[i]
            endpoint = Endpoint(gateway.episode_url(session), session.key, tuple(names), split, plan[i])
            try:
                return call_program(self.program, self.instances(split, plan[i]), endpoint, self.settings.timeout_s)
            finally:
                gateway.sessions.close(session)
                following = limit + next(ended)  # next() on a count is atomic under the GIL
                worker.episode_ended(session.id, sessions[following].id if following < len(sessions) else None)

        with ThreadPoolExecutor(max_workers=limit, thread_name_prefix="teamrl-run") as pool:
            outcomes = list(pool.map(run, range(len(plan))))
        _sampling_worker(gateway).wait_idle(timeout_s=60)  # no sampling may overlap the update that follows
        return list(zip(sessions, outcomes))

    def _drop_report(self, played: list[tuple[EpisodeSession, RunOutcome]], split: str) -> dict[str, float]:
        metrics = {"gateway/runs": float(len(played)), "gateway/dropped_runs": 0.0}
        for session, outcome in played:
            if outcome.dropped:
                log.warning(
                    "gateway: dropped %s run %s of instance %d (%s): %s",
                    split,
                    session.id,
                    session.instance,
                    outcome.dropped,
                    outcome.detail,
                )
                metrics["gateway/dropped_runs"] += 1
                key = f"gateway/dropped/{outcome.dropped}"
                metrics[key] = metrics.get(key, 0.0) + 1
        return metrics

    def _check_determinism(
        self, gateway: Gateway, finished: list[FinishedRun], split: str
    ) -> tuple[dict[str, float], set[int]]:
        """Replay the first finished run of each instance; (metrics, the instances whose prompts or calls differ)."""
        firsts = list({run.instance: run for run in reversed(finished)}.values())
        replayed = self._play(gateway, [run.instance for run in firsts], split, replay=[r.calls for r in firsts])
        differing: set[int] = set()
        for run, (session, outcome) in zip(firsts, replayed):
            same_calls = [(c.agent, c.index) for c in session.calls] == [(c.agent, c.index) for c in run.calls]
            if session.mismatches or not same_calls or outcome.dropped:
                differing.add(run.instance)
                reason = (
                    session.mismatches
                    or ["it made other calls when replayed" if not same_calls else f"replay {outcome.dropped}"]
                )[0]
                log.warning(
                    "gateway: the program is not deterministic given its responses on instance %d (%s); "
                    "it is trained on K independent runs (trajectory-level groups)",
                    run.instance,
                    reason,
                )
        return (
            {"gateway/replayed_runs": float(len(firsts)), "gateway/nondeterministic_runs": float(len(differing))},
            differing,
        )

    def close(self) -> None:
        if self.gateway is not None:
            self.gateway.close()
            _sampling_worker(self.gateway).close()
            self.gateway = None


def scripted_demos(workflow: Workflow, seed: int) -> Iterator[tuple[str, str, str]]:
    """(agent, prompt, response) demonstrations, forever: the program played against `task.script`.

    The prompt is the messages' text as the tiny default model reads them (no chat template: the
    contents joined by blank lines, `teamrl.policies.chat_encoding.encode_chat`).
    """
    if not isinstance(workflow, ProgramWorkflow):
        raise TypeError(f"scripted demonstrations play a program task's workflow, not {type(workflow).__name__}")
    if not workflow.settings.script:
        raise ValueError(
            "the program task warms the tiny default model up on scripted teammates: set "
            "task.script (module:function, script(agent, messages) -> str), or set policy.model "
            "to a model folder"
        )
    script = load_callable(workflow.settings.script, "task.script")
    routes = {a.name: None for a in workflow.agents}
    gateway = Gateway(routes, None, responder=script).start()  # type: ignore[arg-type]
    names = frozenset(routes)
    try:
        for i in itertools.count():
            index = seed * 100_000 + i  # warm-up seeds draw disjoint instances
            session = gateway.sessions.open(index, names, workflow.max_turns)
            endpoint = Endpoint(gateway.episode_url(session), session.key, tuple(routes), "train", index)
            outcome = call_program(
                workflow.program, workflow.instances("train", index), endpoint, workflow.settings.timeout_s
            )
            gateway.sessions.close(session)
            if outcome.dropped:
                raise RuntimeError(
                    f"the program failed against the scripted teammates ({outcome.dropped}): {outcome.detail}"
                )
            for call in session.calls:
                yield call.agent, "\n\n".join(m["content"] for m in call.messages), call.generation.text
    finally:
        gateway.close()


def _sampling_worker(gateway: Gateway) -> SamplingWorker:
    """The sampling worker of a program task's gateway (made with one; only a responder gateway has none)."""
    assert gateway.worker is not None
    return gateway.worker
