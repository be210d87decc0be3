"""MLflow: a sqlite tracking store and an artifact folder under <run>/mlflow/ (no server needed).

MLFLOW_TRACKING_URI, when set, sends the run to that store or server instead. The config is logged as
run params once, when the run starts: MLflow refuses to change a param, and a resumed run may have a
different train.steps. A resumed run continues the same MLflow run (its run id is in trackers.json).
"""

from __future__ import annotations

import os
import time
from typing import Any, Mapping

from teamrl.training.trackers.base import TrackerRun

PARAMS_PER_BATCH = 100  # MLflow's limits for one log_batch call
METRICS_PER_BATCH = 1000


class MlflowTracker:
    """One MLflow run in the experiment named after the project."""

    def __init__(self, run: TrackerRun) -> None:
        from mlflow.entities import Param
        from mlflow.tracking import MlflowClient

        previous = run.previous or {}
        folder = (run.path / "mlflow").resolve()
        local = f"sqlite:///{folder / 'mlflow.db'}"
        self.uri = previous.get("tracking_uri") or os.environ.get("MLFLOW_TRACKING_URI") or local
        if self.uri == local:
            folder.mkdir(parents=True, exist_ok=True)
        self._client = MlflowClient(tracking_uri=self.uri)
        if previous.get("run_id"):
            self.run_id = previous["run_id"]
            self._client.update_run(self.run_id, status="RUNNING")
            return
        experiment = self._client.get_experiment_by_name(run.project)
        if experiment is not None:
            experiment_id = experiment.experiment_id
        else:  # a local store's artifacts stay in the run directory (MLflow's default is ./mlartifacts)
            artifacts = (folder / "artifacts").as_uri() if self.uri == local else None
            experiment_id = self._client.create_experiment(run.project, artifact_location=artifacts)
        self.run_id = self._client.create_run(
            experiment_id, run_name=run.name, tags={"teamrl.run_dir": str(run.path.resolve())}
        ).info.run_id
        params = [Param(key, value) for key, value in run.params.items()]
        for start in range(0, len(params), PARAMS_PER_BATCH):
            self._client.log_batch(self.run_id, params=params[start : start + PARAMS_PER_BATCH])

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        rows = [Metric(key, value, now, step) for key, value in metrics.items()]
        for start in range(0, len(rows), METRICS_PER_BATCH):
            self._client.log_batch(self.run_id, metrics=rows[start : start + METRICS_PER_BATCH])

    def record(self) -> dict[str, Any]:
        return {"tracking_uri": self.uri, "run_id": self.run_id}

    def close(self, failed: bool) -> None:
        self._client.set_terminated(self.run_id, status="FAILED" if failed else "FINISHED")


def open_run(run: TrackerRun) -> MlflowTracker:
    return MlflowTracker(run)
