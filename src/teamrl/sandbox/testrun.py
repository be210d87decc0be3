"""The worker's handling of a `run_tests` request: a candidate process and a judge process.

The request arrives as two frames on the grader pipe. The worker reads only the first (program,
entry point, limits), forks the candidate, and only then forks the judge, which reads the second
frame (tests, trusted setup) straight from the pipe. So the tests are never in the worker's
memory, and therefore never in the memory of any candidate process forked from it.

    grader ──frame 1──> worker ──fork──> candidate (confined; runs the program, answers calls)
           ──frame 2──────────────fork──> judge (reads tests, calls the candidate, streams verdicts)

The judge reports through a pipe only the worker holds the other end of; the candidate has no
way to reach it (different uid, or a non-dumpable judge in the fallback mode).

Model-written tests (request field "untrusted") are not trusted code: once it has read them, the
judge confines itself exactly like a program (same user id, rlimits, guards), and stays
non-dumpable, so the candidate (same uid) can neither ptrace it nor open its descriptors through
/proc. The candidate can at most kill it, which fails the units it did not report yet.
"""

from __future__ import annotations

import json
import os
import resource
import select
import signal
import struct
import time
import traceback
from typing import Any

from . import candidate, child, guards, judge, linux, protocol
from .proctree import IdleClock, TreeCpuClock
from .supervision import WorkerState, classify, kill_leftovers, remove_files, supervise

_RESULT_CAP = 8 * 1024 * 1024
_JUDGE_MEMORY_MB = 1024


def _judge_main(req: dict[str, Any], in_fd: int, fds: dict[int, int], state: WorkerState, workdir: str) -> None:
    """Entry point of the forked judge. Never returns."""
    code = 3
    limits = req["limits"]
    try:
        os.setsid()
        linux.prctl(linux.PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != state.pid:
            os._exit(3)
        # Not dumpable: a candidate with the same uid (fallback mode, or untrusted tests) cannot
        # ptrace us or open our descriptors through /proc.
        linux.prctl(linux.PR_SET_DUMPABLE, 0)
        second = protocol.recv_message(in_fd)  # frame 2: the tests, read by us alone
        # The grader pipe is in step again: whatever happens to us now, the worker can go on.
        protocol.send_message(fds[5], {"read": True})
        if req.get("untrusted"):
            # Closes the grader pipe too; the id change resets dumpable, so clear it again.
            child.confine(fds, workdir, limits, state.confinement, new_session=False)
            linux.prctl(linux.PR_SET_DUMPABLE, 0)
            guard_config = state.guard_config(workdir)
            if guard_config is not None:
                guards.install(**guard_config)
        else:
            child.remap_fds(fds)  # closes the grader pipe too
            cpu = child.cpu_limit_s(limits)
            resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
            memory = _JUDGE_MEMORY_MB * 1024 * 1024
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        code = judge.run_judge(
            str(second.get("tests", "")),
            str(second.get("setup", "") or ""),
            req.get("entry_point"),
            req_fd=4,
            resp_fd=3,
            result_fd=5,
            steps=second.get("steps") if req.get("untrusted") else None,
        )
    except BaseException:  # noqa: BLE001 - anything here is a sandbox bug: say so on our stderr
        try:
            os.write(2, traceback.format_exc().encode()[-4000:])
        except OSError:
            pass
    os._exit(code)


def _wait_exit(pid: int, timeout_s: float) -> None:
    """Wait up to `timeout_s` for `pid` to exit (without reaping it)."""
    pidfd = os.pidfd_open(pid)
    try:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        poller.poll(timeout_s * 1000)
    finally:
        os.close(pidfd)


def _parse_results(data: bytes) -> list[dict[str, Any]]:
    """Decode the judge's stream of framed messages (a cut-off last frame is dropped).

    Model-written tests run in the judge and can write to this pipe too, so anything that is
    not a JSON object ends the stream instead of reaching the worker's logic.
    """
    messages, pos = [], 0
    while pos + 4 <= len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        if pos + 4 + length > len(data):
            break
        try:
            msg = json.loads(data[pos + 4 : pos + 4 + length].decode("utf-8"))
        except ValueError:  # includes UnicodeDecodeError
            break
        if not isinstance(msg, dict):
            break
        messages.append(msg)
        pos += 4 + length
    return messages


def run_tests_request(state: WorkerState, req: dict[str, Any], in_fd: int) -> dict[str, Any]:
    """Run the program against the tests whose frame is still waiting on `in_fd`."""
    limits = req["limits"]
    cap = limits["max_output_bytes"]
    workdir = state.new_workdir()
    null = os.open(os.devnull, os.O_RDWR)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    to_cand_r, to_cand_w = os.pipe()
    to_judge_r, to_judge_w = os.pipe()
    res_r, res_w = os.pipe()
    start = time.monotonic()
    cpid = jpid = -1
    try:
        cpid = os.fork()
        if cpid == 0:
            try:
                candidate.run_candidate(
                    req["program"],
                    {0: null, 1: out_w, 2: err_w, 3: to_cand_r, 4: to_judge_w},
                    workdir,
                    limits,
                    state.confinement,
                    state.guard_config(workdir),
                    rpc_in=3,
                    rpc_out=4,
                )
            finally:
                os._exit(child.SETUP_FAILED_EXIT)
        jpid = os.fork()
        if jpid == 0:
            _judge_main(req, in_fd, {0: null, 1: null, 2: null, 3: to_judge_r, 4: to_cand_w, 5: res_w}, state, workdir)
    finally:
        for fd in (null, out_w, err_w, to_cand_r, to_cand_w, to_judge_r, to_judge_w, res_w):
            os.close(fd)
        if jpid < 0:  # the tests frame is still unread in the pipe: this worker must be replaced
            state.tainted = True
            if cpid > 0:
                os.kill(cpid, signal.SIGKILL)
                os.waitpid(cpid, 0)
            for fd in (out_r, err_r, res_r):
                os.close(fd)
            remove_files(state, workdir)
    try:
        # The idle clock watches the candidate and the judge together: the run waits only when both do.
        judged = supervise(
            jpid,
            start,
            limits["wall_time_s"],
            -1,
            b"",
            [(out_r, cap, True), (err_r, cap, True), (res_r, _RESULT_CAP, False)],
            kill_on_over=cpid,
            idle=IdleClock(state.pid, limits["idle_time_s"], start),
            cpu=TreeCpuClock(child.cpu_limit_s(limits), exclude=frozenset([jpid])),
        )
        # Still running once the judge is done is normal (it waits for the next call): then we
        # kill it and its exit says nothing. Otherwise its exit status tells what happened to it;
        # when the judge saw it go, give it a moment to finish dying (e.g. from SIGXCPU).
        if b'"candidate_gone":true' in judged["outputs"][2]:
            _wait_exit(cpid, 0.5)
        reaped, cand_status, usage = os.wait4(cpid, os.WNOHANG)
        try:
            os.killpg(cpid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if reaped == 0:
            os.wait4(cpid, 0)
            cand_status = 0
    finally:
        kill_leftovers(state)
        remove_files(state, workdir)
    stdout, stderr = (b.decode("utf-8", errors="replace") for b in judged["outputs"][:2])
    try:
        messages = _parse_results(judged["outputs"][2])
    except ValueError:
        messages = []
    if not messages:  # the judge died before it had read the tests frame: the pipe is out of step
        state.tainted = True
        return {"error": "the test judge failed before reading the tests", "wall_s": judged["wall"]}
    units = [str(u) for u in next((msg["units"] for msg in messages if isinstance(msg.get("units"), list)), [])]
    results: list[Any] = [None] * len(units)
    done: dict[str, Any] | None = None
    for msg in messages:
        if isinstance(msg.get("unit"), int) and 0 <= msg["unit"] < len(units):
            results[msg["unit"]] = [bool(msg["passed"]), str(msg.get("error", ""))]
        if msg.get("done"):
            done = msg
    cand = {
        "status": cand_status,
        "cpu": usage.ru_utime + usage.ru_stime,
        "timed_out": judged["timed_out"],
        "over": judged["over"],
    }
    cand_state, _, _ = classify(cand, limits, stderr)
    if judged["timed_out"]:
        status, error = (
            "timeout",
            (
                f"the wall-clock backstop of {limits['wall_time_s']} s was reached "
                "(the program or the tests waited instead of computing)"
            ),
        )
    elif judged["idle"]:
        status, error = (
            "timeout",
            (
                f"the program and the tests waited {judged['idle_s']:.1f} s without "
                f"computing (the idle limit is {limits['idle_time_s']} s)"
            ),
        )
    elif judged["cpu_over"]:
        status, error = (
            "timeout",
            (f"the program's processes used more than {child.cpu_limit_s(limits)} s of CPU together"),
        )
    elif judged["over"]:
        status, error = "output_limit", "the program wrote more than the output limit"
    elif cand_state in ("timeout", "killed", "memory"):
        status, error = cand_state, f"the program process ended with status {cand_state}"
    elif done is None:
        status, error = "sandbox_error", "the test judge stopped without finishing"
        if os.WIFSIGNALED(judged["status"]) and os.WTERMSIG(judged["status"]) in (signal.SIGXCPU, signal.SIGKILL):
            status, error = "timeout", "the tests ran out of CPU time"
    else:
        # The judge only ever says "ok" or "error" (anything else was written by untrusted tests).
        status = "ok" if done.get("status") == "ok" else "error"
        error = str(done.get("error", ""))
    return {
        "units": units,
        "results": results,
        "status": status,
        "error": error,
        "program_stdout": stdout,
        "program_stderr": stderr,
        "wall_s": judged["wall"],
        "program_loaded": bool(done.get("program_loaded", True)) if done else True,
    }
