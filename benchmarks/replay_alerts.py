"""Replay a finished run's logged metrics through the alert rules, with other thresholds if wanted.

    python benchmarks/replay_alerts.py RUN_DIR [--set diagnostics.window=5 ...]

Alerts never change training, so this prints exactly the alerts the run would have raised with the
settings of its config.yaml plus the `--set` overrides (`teamrl.diagnostics.replay`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from teamrl.config import load_config
from teamrl.diagnostics.replay import replay_alerts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    try:
        alerts = replay_alerts(args.run_dir, args.set)
    except (FileNotFoundError, ValueError) as err:
        raise SystemExit(str(err)) from None
    d = load_config(args.run_dir / "config.yaml", args.set).diagnostics
    print(f"{args.run_dir}: window {d.window}, baseline_steps {d.baseline_steps}, echo_cosine {d.echo_cosine}, "
          f"dominant_share {d.dominant_share}")
    for alert in alerts:
        print(f"step {alert.step:4d}  {alert.kind}  {alert.subject}\n    {alert.message}")
    if not alerts:
        print("no alert")


if __name__ == "__main__":
    main()
