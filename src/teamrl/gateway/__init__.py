"""An OpenAI-compatible gateway: train the agents people already write (openai client, LangGraph).

Importing this package registers the `program` task (`task.module: teamrl.gateway`); see
docs/howto/gateway.md.
"""

from teamrl.config.tasks import TASKS, register_task
from teamrl.gateway.batching import SamplingWorker
from teamrl.gateway.grouping import EpisodeResult
from teamrl.gateway.program import ProgramSettings, ProgramWorkflow, scripted_demos
from teamrl.gateway.runs import Endpoint
from teamrl.gateway.server import AgentRoute, Gateway, GatewayLimits

if "program" not in TASKS:  # importing twice (a reload) must not fail
    register_task("program", workflow=ProgramWorkflow, settings=ProgramSettings, demos=scripted_demos)

__all__ = [
    "AgentRoute",
    "Endpoint",
    "EpisodeResult",
    "Gateway",
    "GatewayLimits",
    "ProgramSettings",
    "ProgramWorkflow",
    "SamplingWorker",
]
