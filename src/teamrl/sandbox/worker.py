"""The warm worker process: receives requests from the grader and forks one child per program.

Started by `pool.py` as `python -I -c <bootstrap>` (handle.py; the package directory and the
configuration come as the first message on the request pipe) with a scrubbed environment, so it
shares nothing with the grader except two pipes. It applies the process-wide
isolation once (namespaces, see isolation.py), pre-imports common modules so programs start
fast, and then for each request:

1. makes a fresh directory for the program (owned by the program's user id),
2. forks; the child confines itself (child.py) and runs the program,
3. supervises it: feeds stdin, collects stdout/stderr up to the caps, enforces the idle limit
   (proctree.IdleClock), the CPU limit of the program's whole process tree (proctree.TreeCpuClock;
   each process also has the kernel's RLIMIT_CPU, set by the child itself) and the wall-clock
   backstop,
4. kills the program's process group, reaps it, then kills and reaps anything else the program
   left behind (the worker is pid 1 of its own PID namespace where the kernel allows, else a
   child subreaper, so every leftover process is its descendant; see pidns.py),
5. deletes the program's files and answers with the result.
"""

from __future__ import annotations

import gc
import importlib
import os
import shutil
import sys
import time
from typing import Any

from . import child, guards, isolation, protocol, rootfs, testrun
from .proctree import IdleClock, TreeCpuClock
from .supervision import WorkerState, classify, kill_leftovers, remove_files, supervise


# ----------------------------------------------------------------------------- requests


def run_request(state: WorkerState, req: dict[str, Any]) -> dict[str, Any]:
    """Run one program (op "run") and describe the outcome."""
    limits = req["limits"]
    workdir = state.new_workdir()
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        try:
            child.run_program(
                req["code"],
                {0: in_r, 1: out_w, 2: err_w},
                workdir,
                limits,
                state.confinement,
                state.guard_config(workdir),
            )
        finally:
            os._exit(child.SETUP_FAILED_EXIT)
    for fd in (in_r, out_w, err_w):
        os.close(fd)
    try:
        cap = limits["max_output_bytes"]
        outcome = supervise(
            pid,
            start,
            limits["wall_time_s"],
            in_w,
            req.get("stdin", "").encode("utf-8"),
            [(out_r, cap, True), (err_r, cap, True)],
            idle=IdleClock(state.pid, limits["idle_time_s"], start),
            cpu=TreeCpuClock(child.cpu_limit_s(limits)),
        )
    finally:
        kill_leftovers(state)
        remove_files(state, workdir)
    stdout, stderr = (b.decode("utf-8", errors="replace") for b in outcome["outputs"])
    status, exit_code, timed_out = classify(outcome, limits, stderr)
    limit = ""
    if timed_out:
        limit = "wall" if outcome["timed_out"] else "idle" if outcome["idle"] else "cpu"
    return {
        "stdout": stdout,
        "stderr": stderr,
        "exit_code": exit_code,
        "timed_out": timed_out,
        "status": status,
        "wall_s": outcome["wall"],
        "cpu_s": outcome["cpu"],
        "limit": limit,
    }


def main(config: dict[str, Any]) -> None:
    """Worker entry point (see module docstring); `config`: the pool's worker settings."""
    # Keep the grader pipes away from fds 0/1 so that nothing printing by accident corrupts them.
    in_fd, out_fd = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    for name in config["preimport"]:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    # Every module the worker needs is imported by now: with the new root in place, the source of
    # this package (in a checkout, or anywhere) is no longer reachable.
    visible = rootfs.visible_paths(config["grant_paths"])
    rootfs.prune_sys_path(visible)
    report = isolation.setup_worker(
        config["fallback_scratch"],
        config["hide_paths"],
        config["parent_pid"],
        config["os_isolation"],
        config["tmpfs_mb"],
        visible,
        config["pid_namespace"],
        config["new_root"],
    )
    state = WorkerState(report, config["hide_paths"])
    if state.guard_template is not None and state.guard_template["restrict_files"]:
        guards.prepare(state.guard_template["read_roots"], state.guard_template["hidden_paths"])
    os.makedirs(state.scratch, mode=0o711, exist_ok=True)
    os.chmod(state.scratch, 0o711 if state.uid is not None else 0o700)
    child.remember_own_modules()
    child.ready_interpreter()
    gc.collect()
    gc.freeze()  # forked children then do not touch (copy) the pages of these objects
    protocol.send_message(out_fd, {"ready": True, "pid": state.pid, "isolation": report})
    while True:
        try:
            req = protocol.recv_message(in_fd)
        except protocol.ProtocolError:
            break  # the grader closed the pipe: shut down
        op = req.get("op")
        try:
            if op == "run":
                reply = run_request(state, req)
            elif op == "run_tests":
                reply = testrun.run_tests_request(state, req, in_fd)
            elif op == "quit":
                break
            else:
                reply = {"error": f"unknown op {op!r}"}
        except Exception as exc:  # noqa: BLE001 - report worker bugs instead of dying silently
            reply = {"error": f"worker failed: {exc!r}"}
            state.tainted = True
        reply["tainted"] = state.tainted
        protocol.send_message(out_fd, reply)
        # Drop the last request and reply before the next request forks its candidate: the reply
        # holds the judge's unit sources (for ground truth: the hidden tests) and the request the
        # last program, and a candidate inherits this heap, where `gc.get_objects()` finds every
        # object still referenced (the reward-hacking probe's "read the tests" scored full marks).
        del req, reply
        if state.tainted:
            break
    kill_leftovers(state)
    if not state.private_tmp:
        shutil.rmtree(state.scratch, ignore_errors=True)
    sys.exit(0)
