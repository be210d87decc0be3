"""The cache key of a warmed-up checkpoint: a hash of its recipe and of the code that shapes it.

A warm-up is cached under a folder named after this digest, so editing a scripted agent, the task's
workflow or environment, the model builder or the training code trains a new checkpoint instead of
silently reusing an old one. The task entry's `sources` name the task's modules (a user's task may
list none; then its workflow's and demos' own modules are hashed).
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import json
from types import ModuleType
from typing import Any

from teamrl.config.tasks import task_entry


def task_modules(task: str, first: list[ModuleType]) -> list[ModuleType]:
    """`first`, then the task's source modules, then its workflow's and demos' modules (no repeats)."""
    entry = task_entry(task)
    modules = list(first) + [importlib.import_module(name) for name in entry.sources]
    for part in (entry.workflow, entry.demos):
        module = inspect.getmodule(part)
        if module is not None and module not in modules:
            modules.append(module)
    return modules


def recipe_digest(fields: dict[str, Any], modules: list[ModuleType]) -> str:
    """12 hex digits of SHA-256 over the recipe's fields (sorted JSON) and the modules' source."""
    payload = json.dumps(fields, sort_keys=True) + "".join(inspect.getsource(m) for m in modules)
    return hashlib.sha256(payload.encode()).hexdigest()[:12]
