"""teamrl's local Ray: its worker processes run at the driver's priority (Ray's default nices them to 15).

In a module of its own: the other Ray tests keep a module-wide Ray running, which this test must not find."""

from __future__ import annotations

import os

import pytest

from teamrl.training.backends.ray_backend import connect

ray = pytest.importorskip("ray", reason="the Ray backend tests need Ray: pip install 'teamrl[ray]'")


def test_a_local_ray_runs_its_workers_at_the_drivers_priority():
    """Ray's default worker niceness (15) starves the actors beside any busy process; teamrl's local Ray
    keeps them at the driver's."""
    if ray.is_initialized():
        pytest.skip("a Ray is already running in this process (its settings are not teamrl's)")
    assert connect()
    try:

        @ray.remote
        def niceness() -> int:
            return os.nice(0)

        assert ray.get(niceness.remote()) == os.nice(0)
    finally:
        ray.shutdown()
