"""train.threads: the `auto` rule against hand-computed cases, its re-decision every step, and what
a tiny run logs (the thread count, and the smaller evaluations between the first and the last)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
import torch

from teamrl.config import ConfigError, load_config
from teamrl.setup import threads as threads_module
from teamrl.training.loop import train
from teamrl.setup.threads import ThreadGovernor, auto_threads, resolve_threads


@pytest.fixture(autouse=True)
def keep_torch_threads(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)  # `auto` would take it as given
    # The machine's real CPU use must not enter the hand-computed cases (tests below set their own).
    monkeypatch.setattr(threads_module, "_busy_now", lambda: None)
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize("cores, others, expected", [
    (2, 0.0, 2), (2, 0.1, 2),  # an idle 2-core machine: both cores
    (2, 1.0, 1), (2, 1.1, 1), (2, 0.8, 1),  # a busy process beside us: one thread, never two
    (2, 7.0, 1),  # overloaded: still one
    (16, 0.3, 4),  # capped at AUTO_CAP
    (16, 13.5, 2), (4, 1.9, 2), (4, 1.25, 3), (4, 1.26, 2),  # the 0.25 slack, at its edge
    (1, 0.0, 1),
])
def test_auto_uses_the_whole_cores_others_leave_free(cores, others, expected):
    # floor(cores - others + 0.25), between 1 and min(4, cores), worked out by hand
    assert auto_threads(cores, others) == expected


def test_resolve_threads_reads_the_load_and_subtracts_our_own(monkeypatch):
    monkeypatch.setattr(threads_module, "usable_cores", lambda: 4)
    monkeypatch.setattr(threads_module.os, "getloadavg", lambda: (3.0, 0.0, 0.0))
    assert resolve_threads("auto") == 1  # 3 busy of 4: one left
    assert resolve_threads("auto", own_load=2.0) == 3  # two of the three were ours
    assert resolve_threads("auto", own_load=2.0, cap=2) == 2  # an actor's share of the CPUs
    assert resolve_threads(3) == 3 and resolve_threads(3, cap=2) == 2  # a fixed count ignores the load
    with pytest.raises(ValueError, match="neither 'auto' nor a whole number"):
        resolve_threads(0)


def test_auto_takes_omp_num_threads_when_it_is_set(monkeypatch):
    monkeypatch.setattr(threads_module, "usable_cores", lambda: 4)
    monkeypatch.setattr(threads_module.os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    assert resolve_threads("auto") == 4
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert resolve_threads("auto") == 1 and resolve_threads("auto", cap=1) == 1
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert resolve_threads("auto") == 3 and resolve_threads("auto", cap=2) == 2
    monkeypatch.setenv("OMP_NUM_THREADS", "nonsense")  # not a count: the load decides
    assert resolve_threads("auto") == 4


def test_the_governor_drops_at_once_and_grows_one_thread_a_step(monkeypatch):
    load, clock = [0.0], [0.0, 0.0]  # load average; (process CPU seconds, wall seconds)
    monkeypatch.setattr(threads_module, "usable_cores", lambda: 4)
    monkeypatch.setattr(threads_module.os, "getloadavg", lambda: (load[0], 0.0, 0.0))
    monkeypatch.setattr(threads_module.time, "process_time", lambda: clock[0])
    monkeypatch.setattr(threads_module.time, "monotonic", lambda: clock[1])
    governor = ThreadGovernor("auto")

    def step(new_load: float, own_cpu_s: float, wall_s: float = 10.0) -> int:
        load[0] = new_load
        clock[0] += own_cpu_s
        clock[1] += wall_s
        return governor.apply()

    assert step(0.0, 0.0) == 4 and torch.get_num_threads() == 4
    # We kept 4 cores busy (40 CPU s in 10 s) and another process appeared: load 5 -> 1 other.
    assert step(5.0, 40.0) == 3
    # Three other processes now (load 6, ours 3): down to 1 at once.
    assert step(6.0, 30.0) == 1 and torch.get_num_threads() == 1
    # They left: the free cores come back one thread per step.
    assert [step(1.0, 10.0), step(2.0, 20.0), step(3.0, 30.0)] == [2, 3, 4]
    fixed = ThreadGovernor(2)
    load[0] = 9.0
    assert fixed.apply() == 2


STAT = """cpu  1 2 3 4 5 6 7 8 0 0
cpu0 100 5 20 900 40 1 2 3 50 0
cpu1 10 0 10 500 0 0 0 0 0 0
cpu2 7 0 0 0 0 0 0 0 0 0
intr 12345
"""


def test_busy_cpu_seconds_reads_only_our_cores_and_counts_all_but_idle_and_iowait():
    # cpu0: 100 + 5 + 20 + 1 + 2 + 3 = 131 busy ticks (idle 900, iowait 40 and guest 50 left out)
    assert threads_module.busy_cpu_seconds(STAT, {0}, 100) == pytest.approx(1.31)
    assert threads_module.busy_cpu_seconds(STAT, {0, 1}, 100) == pytest.approx(1.51)
    assert threads_module.busy_cpu_seconds(STAT, {5}, 100) == 0.0  # not on this machine: nothing
    assert threads_module.other_cores(10.0, 9.0, 0.0, 1.0) == 0.0  # never negative
    assert threads_module.other_cores(10.0, 14.0, 1.0, 0.0) == 0.0  # no interval: no reading
    assert threads_module.other_cores(10.0, 14.0, 1.0, 2.0) == pytest.approx(1.5)


def test_measured_cpu_use_of_others_beats_a_lagging_load_average(monkeypatch):
    monkeypatch.setattr(threads_module, "usable_cores", lambda: 2)
    monkeypatch.setattr(threads_module.os, "getloadavg", lambda: (0.1, 0.0, 0.0))  # not risen yet
    assert resolve_threads("auto", others_now=0.0) == 2
    assert resolve_threads("auto", others_now=1.0) == 1  # a new busy process: one thread at once
    monkeypatch.setattr(threads_module.os, "getloadavg", lambda: (1.2, 0.0, 0.0))  # not fallen yet
    assert resolve_threads("auto", others_now=0.0) == 1  # the larger reading decides: grow later


def test_the_first_decision_samples_the_others_and_later_ones_read_the_last_interval(monkeypatch):
    busy, clock = [0.0], [0.0, 0.0]  # busy CPU seconds of our cores; (our CPU seconds, wall seconds)
    monkeypatch.setattr(threads_module, "usable_cores", lambda: 2)
    monkeypatch.setattr(threads_module.os, "getloadavg", lambda: (0.0, 0.0, 0.0))  # lags: says idle
    monkeypatch.setattr(threads_module, "_busy_now", lambda: busy[0])
    monkeypatch.setattr(threads_module.time, "process_time", lambda: clock[0])
    monkeypatch.setattr(threads_module.time, "monotonic", lambda: clock[1])
    slept = []

    def sleep(seconds):  # the first decision's sample: another process kept a core busy meanwhile
        slept.append(seconds)
        busy[0] += seconds
        clock[1] += seconds
    monkeypatch.setattr(threads_module.time, "sleep", sleep)
    governor = ThreadGovernor("auto")
    assert governor.apply() == 1 and slept == [threads_module.FIRST_SAMPLE_S]

    def step(own_cpu_s: float, others_cpu_s: float, wall_s: float = 10.0) -> int:
        clock[0] += own_cpu_s
        clock[1] += wall_s
        busy[0] += own_cpu_s + others_cpu_s
        return governor.apply()
    assert step(10.0, 0.0) == 2  # the other process left: both cores (no more sampling)
    assert step(15.0, 3.0) == 1  # one came back (3 of its CPU seconds while we took 15): at once
    assert slept == [threads_module.FIRST_SAMPLE_S]


def test_a_core_burning_process_is_seen_in_the_cpu_readings(monkeypatch):
    monkeypatch.undo()  # the real /proc/stat
    if threads_module._busy_now() is None:
        pytest.skip("no per-CPU /proc/stat for this process's cores here")
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)
        # Every busy tick of our cores while we sleep is another process's: the burner's or any other job's.
        assert threads_module.sample_other_cores(0.5) >= 0.5
    finally:
        burner.kill()
        burner.wait()


def test_bad_thread_settings_fail_at_config_load():
    for bad in ("train.threads=0", "train.threads=lots", "train.threads=true"):
        with pytest.raises(ConfigError, match="train.threads .* auto or a whole number"):
            load_config(None, [bad])
    with pytest.raises(ConfigError, match="midway_eval_instances"):
        load_config(None, ["train.midway_eval_instances=-1"])


def test_a_run_logs_its_threads_and_evaluates_fewer_instances_midway(tmp_path, random_model_dir):
    config = load_config(None, ["task.name=plan_path", "task.size=4", "task.min_distance=2", "workflow.max_turns=2",
                                "rollout.max_new_tokens=6", "train.batch_size=2", "algorithm.k=2", "run_name=run",
                                "train.steps=2", "train.eval_every=1", "train.eval_instances=4",
                                "train.midway_eval_instances=2", "train.threads=1",
                                f"policy.model={random_model_dir}", f"output_dir={tmp_path}"])
    run = train(config, progress=False)
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["eval/instances"] for r in rows if "eval/instances" in r] == [4.0, 2.0, 4.0]  # first, midway, final
    assert all(r["time/threads"] == 1.0 for r in rows if "train/success" in r or "eval/instances" in r)
    assert all(r["time/onednn_layers"] == 0.0 for r in rows if "eval/instances" in r)  # 32-wide: none turned
    summary = json.loads((run / "summary.json").read_text())
    assert summary["best_instances"] == 2
