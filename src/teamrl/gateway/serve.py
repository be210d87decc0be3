"""`teamrl serve RUN_DIR` (or `teamrl serve CONFIG.yaml`): a team's policies behind the OpenAI-compatible API.

Each agent of the run's workflow is served by the policy the run mapped it to, from the run's final
checkpoint (else its best), with the run's held-out sampling settings; a request's `temperature` and
`top_p` are honoured here (nothing is trained from these calls). The config's `rollout.engine` samples:
with `vllm` the policies are served by vLLM engines (`teamrl.rollout.engine_routing`), which `stop_serving`
closes.
"""

from __future__ import annotations

from pathlib import Path

import torch

from teamrl.config import ConfigError, load_config
from teamrl.gateway.batching import SamplingWorker
from teamrl.gateway.server import AgentRoute, Gateway
from teamrl.rollout.agent_params import agent_sampling
from teamrl.rollout.sampler import release
from teamrl.rollout.tree import params_by_agent
from teamrl.setup.loaded_team import Team, locate
from teamrl.setup.threads import set_threads


def serve_run(
    path: Path,
    host: str = "127.0.0.1",
    port: int = 0,
    token: str | None = None,
    batch_window_ms: float = 20.0,
    threads: int | str | None = None,
    overrides: list[str] | None = None,
) -> Gateway:
    """A started gateway over a team's policies (`stop_serving` closes it, its worker and its engines).

    path: a run directory or one of its `checkpoints/<tag>` folders (the trained policies), or a config
    file (`.yaml`: its base, untrained policies; `overrides` apply to it, e.g. policy.model=NAME).
    threads: torch's thread count for sampling, an int or "auto" (None: the config's `train.threads`).
    """
    checkpoint: Path | None = None
    if path.suffix in (".yaml", ".yml"):
        config = load_config(path, overrides or [])
    elif overrides:
        raise ConfigError("overrides apply to a config file; a run is served as it was trained")
    else:
        config, checkpoint = locate(path)
    set_threads(config.train.threads if threads is None else threads)
    team = Team.from_config(config, checkpoint=checkpoint)  # the checkpoint's policies, or the base ones
    names = team.agents
    params = params_by_agent(agent_sampling(config.rollout, team.workflow.agents, "eval"), names)
    routes = {
        name: AgentRoute(team.policies[team.agent_to_policy[name]], params[name], request_sampling=True)
        for name in names
    }
    worker = SamplingWorker(torch.Generator().manual_seed(config.seed), batch_window_ms / 1000)
    return Gateway(routes, worker, host=host, port=port, token=token).start()


def stop_serving(gateway: Gateway) -> None:
    """Close a gateway started by `serve_run`: the HTTP server, then the sampling worker (so nothing samples
    any more), then the engines serving its policies (vLLM's; the built-in engine holds nothing)."""
    gateway.close()
    if gateway.worker is not None:
        gateway.worker.close()
    release({agent: route.policy for agent, route in gateway.routes.items()})
