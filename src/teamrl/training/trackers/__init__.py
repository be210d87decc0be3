"""Experiment trackers (`report_to`): TensorBoard, Weights & Biases, MLflow, trackio, each optional.

Each tracker is one module with `open_run(TrackerRun) -> Tracker` (the Protocol in base.py); the run
directory opens the configured ones (registry.open_trackers) and sends every metrics row to all of
them, with the same slash-namespaced names as metrics.jsonl.
"""

from teamrl.config.report_to import BACKENDS, resolve_report_to
from teamrl.training.trackers.base import Tracker, TrackerRun
from teamrl.training.trackers.registry import Trackers, open_trackers

__all__ = ["BACKENDS", "Tracker", "TrackerRun", "Trackers", "open_trackers", "resolve_report_to"]
