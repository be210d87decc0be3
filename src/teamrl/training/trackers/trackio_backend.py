"""trackio, local: the run goes to trackio's own folder, a sqlite database per project.

That folder is TRACKIO_DIR when set, else ~/.cache/huggingface/trackio; trackio reads it once, when it
is first imported, so teamrl does not move it per run. trackers.json names the folder and database.
`trackio show --project PROJECT` (with the same TRACKIO_DIR) opens the dashboard. A resumed run
continues the trackio run of the same name.
"""

from __future__ import annotations

import contextlib
import io
from typing import Any, Mapping

from teamrl.training.trackers.base import TrackerRun


class TrackioTracker:
    """One trackio run; the config is its run config."""

    def __init__(self, run: TrackerRun) -> None:
        import trackio
        from trackio.sqlite_storage import SQLiteStorage

        previous = run.previous or {}
        self.project = run.project
        # trackio prints a banner with dashboard hints on stdout; teamrl's own output stays readable.
        with contextlib.redirect_stdout(io.StringIO()):
            self._run = trackio.init(
                project=run.project,
                name=previous.get("name", run.name),
                config=run.config,
                resume="must" if previous else "never",
                embed=False,
                auto_log_gpu=False,
                auto_log_cpu=False,
            )
        self.database = SQLiteStorage.get_project_db_path(run.project)

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        self._run.log(dict(metrics), step=step)

    def record(self) -> dict[str, Any]:
        return {"project": self.project, "name": self._run.name, "id": self._run.id, "database": str(self.database)}

    def close(self, failed: bool) -> None:
        import trackio
        from trackio import context_vars

        with contextlib.redirect_stdout(io.StringIO()):
            if context_vars.current_run.get() is self._run:
                trackio.finish()  # also forgets the run, else trackio finishes it again at exit
            else:
                self._run.finish()  # waits for its background writer to reach the database


def open_run(run: TrackerRun) -> TrackioTracker:
    return TrackioTracker(run)
