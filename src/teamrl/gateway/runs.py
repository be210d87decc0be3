"""Running a user's program once per episode: in a thread (a function, sync or async) or as a command.

Each run gets an `Endpoint`: its own base URL and API key, so every call it makes is attributed to
it. A run that raises, exceeds its time limit, returns no reward or an invalid one (NaN, inf, beyond
`grouping.MAX_ABS_REWARD`) is dropped with its reason; the
step goes on with the others. A timed-out run cannot be killed (it is a thread), so its session is
closed: its later calls are refused and it ends at its first one.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
import os
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from teamrl.gateway.grouping import EpisodeResult, InvalidReward, parse_result


@dataclass(frozen=True)
class Endpoint:
    """Where one run's agents are served: pass `base_url` and `api_key` to your OpenAI client."""

    base_url: str
    api_key: str
    agents: tuple[str, ...]
    split: str  # train or heldout
    index: int  # the task instance's index in its split

    def env(self) -> dict[str, str]:
        """The environment variables a command-line program reads (the openai client reads the first two)."""
        return {
            "OPENAI_BASE_URL": self.base_url,
            "OPENAI_API_KEY": self.api_key,
            "TEAMRL_AGENTS": ",".join(self.agents),
            "TEAMRL_SPLIT": self.split,
            "TEAMRL_INDEX": str(self.index),
        }


Program = Callable[[Any, Endpoint], Any]
"""`program(instance, endpoint) -> reward`: plays one episode (see `grouping.parse_result`)."""


def load_callable(spec: str, key: str) -> Callable[..., Any]:
    """`pkg.module:function` or `path/to/file.py:function` imported; errors name the config key.

    A file's folder goes on sys.path first (as when the file is run as a script), so its own imports
    of modules beside it work.
    """
    module_name, _, attr = spec.rpartition(":")
    if not module_name or not attr:
        raise ValueError(f"{key} = {spec!r}: give module:function, e.g. my_pkg.agents:run_episode")
    if module_name.endswith(".py"):
        path = Path(module_name).expanduser().resolve()
        if not path.is_file():
            raise ValueError(f"{key} = {spec!r}: no such file {path}")
        if str(path.parent) not in sys.path:
            sys.path.insert(0, str(path.parent))
        module_name = path.stem
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        raise ValueError(f"{key} = {spec!r}: cannot import {module_name!r} ({err}); check PYTHONPATH") from err
    target = getattr(module, attr, None)
    if not callable(target):
        raise ValueError(f"{key} = {spec!r}: {module_name} has no function {attr!r}")
    return target


def command_program(command: str) -> Program:
    """A program that runs `command` per episode: the instance as JSON on stdin and in TEAMRL_INSTANCE,
    the endpoint in OPENAI_BASE_URL / OPENAI_API_KEY; the last stdout line is its result as JSON."""
    argv = shlex.split(command)

    def run(instance: Any, endpoint: Endpoint, timeout_s: float | None = None) -> Any:
        text = json.dumps(instance)
        env = dict(os.environ, TEAMRL_INSTANCE=text, **endpoint.env())
        done = subprocess.run(argv, input=text, capture_output=True, text=True, env=env, timeout=timeout_s)
        if done.returncode != 0:
            raise RuntimeError(f"exit status {done.returncode}: {done.stderr.strip()[-500:]}")
        lines = done.stdout.strip().splitlines()
        if not lines:
            raise ValueError("the command printed no result line")
        return json.loads(lines[-1])

    run.takes_timeout = True  # type: ignore[attr-defined]
    return run


@dataclass
class RunOutcome:
    """A run's result, or why it was dropped."""

    result: EpisodeResult | None = None
    dropped: str = ""  # crashed | timeout | no_reward | invalid_reward ('' when it reported)
    detail: str = ""


def call_program(program: Program, instance: Any, endpoint: Endpoint, timeout_s: float) -> RunOutcome:
    """Run `program` once, within `timeout_s`, in a thread of its own (an async program in its own loop)."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            if getattr(program, "takes_timeout", False):
                timed: Any = program  # a command program (`takes_timeout`) is also given its time limit
                box["value"] = timed(instance, endpoint, timeout_s)
            elif inspect.iscoroutinefunction(program):
                box["value"] = asyncio.run(program(instance, endpoint))
            else:
                box["value"] = program(instance, endpoint)
        except BaseException as err:  # noqa: BLE001 - whatever the program raises drops its episode
            box["error"] = err

    thread = threading.Thread(target=target, name="teamrl-program", daemon=True)
    started = time.monotonic()
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive() or isinstance(box.get("error"), subprocess.TimeoutExpired):
        return RunOutcome(dropped="timeout", detail=f"no result after {time.monotonic() - started:.1f}s")
    if "error" in box:
        err = box["error"]
        return RunOutcome(dropped="crashed", detail=f"{type(err).__name__}: {err}")
    try:
        return RunOutcome(parse_result(box.get("value")))
    except InvalidReward as err:
        return RunOutcome(dropped="invalid_reward", detail=str(err))
    except (ValueError, TypeError) as err:
        return RunOutcome(dropped="no_reward", detail=str(err))
