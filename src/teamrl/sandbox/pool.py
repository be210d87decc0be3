"""The grader-side `Sandbox`: a pool of warm worker processes that run untrusted programs.

Each worker is a fresh interpreter (not a fork of the grader, so it holds none of the grader's
memory) started with a scrubbed environment. It forks one confined child per program, which costs
about a millisecond instead of the tens of milliseconds of starting `python` anew.
"""

from __future__ import annotations

import os
import queue
import shutil
import sys
import tempfile
import threading
import uuid
import weakref
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Sequence

from . import protocol
from .handle import PACKAGE_DIR, SandboxError, WorkerHandle
from .iotests import outputs_match
from .spec import ProgramResult, SandboxLimits, TestCaseResult, TestResult

# Imported once in each worker so programs that use them start without import cost.
DEFAULT_PREIMPORT = (
    "collections",
    "itertools",
    "functools",
    "math",
    "heapq",
    "bisect",
    "re",
    "string",
    "random",
    "typing",
    "dataclasses",
    "copy",
    "operator",
    "fractions",
    "decimal",
    "json",
    "datetime",
    "enum",
    "array",
    "statistics",
    "traceback",
    "tempfile",
    "threading",
    "queue",
    "io",
)
# Extra time the grader waits for a worker beyond the program's wall limit (fork, cleanup).
_REPLY_GRACE_S = 15.0


def default_hide_paths() -> list[str]:
    """Directories programs must not see: the grader's cwd and home, the data sets, this repo.

    No longer the sandbox's default `hide_paths`: programs see only an allow-list (rootfs.py),
    which leaves all of these out wherever they are. Kept for callers that list them.

    Paths that contain the Python installation (or are "/") are left out, since programs need
    the standard library; so is /tmp itself (a grader started in /tmp), which the workers replace
    with their own private tmpfs.
    """
    candidates = [os.getcwd(), os.path.expanduser("~")]
    data_dir = os.environ.get("TEAMRL_DATA_DIR")
    if data_dir:
        candidates.append(data_dir)
    repo_root = Path(PACKAGE_DIR).parents[2]  # src/teamrl/sandbox -> repo root (source checkout)
    if (repo_root / "pyproject.toml").exists():
        candidates += [str(repo_root), str(repo_root.parent / "shared" / "datasets")]
    needed = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, os.path.dirname(os.__file__), sys.executable)}
    result = []
    for cand in candidates:
        real = os.path.realpath(cand)
        if real == "/" or any(n == real or n.startswith(real + "/") for n in needed):
            continue
        if real == "/tmp" or "/tmp".startswith(real + "/"):
            continue  # /tmp is replaced by the workers' private tmpfs anyway; hiding it breaks that
        if real not in result:
            result.append(real)
    return result


def check_grant_paths(paths: Sequence[str | os.PathLike[str]]) -> list[str]:
    """Validate `Sandbox(grant_paths=...)`; return the paths as absolute, normalised strings.

    Each must be an existing absolute path outside /tmp (programs get a private /tmp of their
    own, which would hide it) and not "/" (that would grant everything).
    """
    if isinstance(paths, (str, bytes)) or not isinstance(paths, Sequence):
        raise TypeError(f"grant_paths must be a list of paths, got {type(paths).__name__}: {paths!r:.80}")
    result = []
    for raw in paths:
        try:
            path = os.fspath(raw)
        except TypeError:
            raise TypeError(f"grant_paths entries must be paths (str or os.PathLike), got {raw!r:.80}") from None
        if not isinstance(path, str) or not os.path.isabs(path):
            raise ValueError(f"grant_paths entries must be absolute paths, got {raw!r}")
        path = os.path.normpath(path)
        if path == "/":
            raise ValueError("grant_paths may not contain '/': that would show programs the whole filesystem")
        if not os.path.exists(path):
            raise ValueError(f"grant_paths entry {path!r} does not exist; create it before the Sandbox")
        if os.path.realpath(path) == "/tmp" or os.path.realpath(path).startswith("/tmp/"):
            raise ValueError(
                f"grant_paths entry {path!r} is under /tmp, which programs see as a private "
                "tmpfs of their own; put the files somewhere else (e.g. under the run directory)"
            )
        result.append(path)
    return result


def _fast_tmp_dir() -> str:
    """Where per-program directories go when the worker has no private tmpfs.

    /dev/shm (a tmpfs) when usable: creating and deleting a directory there takes microseconds,
    against milliseconds on a journaling disk.
    """
    shm = "/dev/shm"
    if os.path.isdir(shm) and os.access(shm, os.W_OK | os.X_OK):
        return shm
    return tempfile.gettempdir()


class Sandbox:
    """Run untrusted Python programs in confined, short-lived processes.

    limits: resource limits applied to every program.
    workers: number of warm worker processes, i.e. how many programs run at once.
    grant_paths: files or directories programs may read (read-only) beyond what they always see:
        their own directory, the Python installation and the system libraries (see rootfs.py).
        Empty by default: nothing of the grader's, no data set, no checkout is visible unless a
        task grants it here. Absolute, existing, not under /tmp.
    hide_paths: paths to cover even where they are inside what programs see (e.g. a part of a
        granted directory); this package's own directory always is. (Paths outside what programs
        see need no hiding: they are not there. `default_hide_paths()` lists the grader's
        directories, which the deny-list of earlier versions hid.)
    os_isolation: True uses namespaces and a separate user id where the machine allows (falling
        back to an unprivileged user namespace without root, then to in-process guards); False
        forces the in-process guards only; "userns" forces the unprivileged user-namespace path
        even as root. The last two exist to test what other machines get.
    """

    # Tests turn these off to exercise what machines without PID namespaces, or without a mount
    # namespace (where the guards must enforce the allow-list), get.
    _pid_namespace = True
    _new_root = True

    def __init__(
        self,
        limits: SandboxLimits = SandboxLimits(),
        workers: int = 2,
        hide_paths: list[str] | None = None,
        os_isolation: bool | str = True,
        preimport: tuple[str, ...] = DEFAULT_PREIMPORT,
        tmpfs_mb: int = 256,
        grant_paths: Sequence[str | os.PathLike[str]] = (),
    ):
        if not isinstance(limits, SandboxLimits):
            raise TypeError(f"limits must be a SandboxLimits, got {type(limits).__name__}")
        if not (isinstance(workers, int) and workers >= 1):
            raise ValueError(f"workers must be an int >= 1, got {workers!r}")
        if os_isolation not in (True, False, "userns"):
            raise ValueError(f"os_isolation must be True, False or 'userns', got {os_isolation!r}")
        if sys.platform != "linux":
            raise SandboxError(f"the sandbox needs Linux (fork, pidfd, namespaces); this is {sys.platform}")
        self.limits = limits
        self.workers = workers
        self.grant_paths = tuple(check_grant_paths(grant_paths))
        # A non-editable install puts this package in site-packages, which programs see.
        hide = [str(Path(PACKAGE_DIR).parent)] + list(hide_paths or [])
        # An explicit grant wins over a hidden directory around it.
        granted = [os.path.realpath(g) for g in self.grant_paths]
        hide = [
            h
            for h in map(os.path.realpath, hide)
            if not any(g == h or g.startswith(h.rstrip("/") + "/") for g in granted)
        ]
        self._scratch = os.path.join(_fast_tmp_dir(), f"teamrl-sandbox-{uuid.uuid4().hex[:12]}")
        self._config = {
            "parent_pid": os.getpid(),
            "hide_paths": hide,
            "grant_paths": list(self.grant_paths),
            "os_isolation": {True: "auto", False: "off", "userns": "userns"}[os_isolation],
            "tmpfs_mb": int(tmpfs_mb),
            "fallback_scratch": self._scratch,
            "preimport": list(preimport),
            "pid_namespace": self._pid_namespace,
            "new_root": self._new_root,
        }
        self._lock = threading.Lock()
        self._closed = False
        self._all: list[WorkerHandle] = []
        self._idle: queue.Queue[WorkerHandle] = queue.Queue()
        self._executor: ThreadPoolExecutor | None = None
        self._owner_pid = os.getpid()
        try:
            self._all.extend(WorkerHandle(self._config) for _ in range(workers))
            for worker in self._all:
                self._idle.put(worker.wait_ready())
        except BaseException:
            self.close()
            raise
        # Also runs at interpreter exit (finalize objects are atexit-registered by default).
        self._finalizer = weakref.finalize(self, Sandbox._shutdown, self._all, self._scratch, self._owner_pid)

    # ------------------------------------------------------------------ public API

    @property
    def isolation(self) -> dict[str, Any]:
        """What confines the programs on this machine (as reported by the first worker).

        Keys: network ("netns" or "python-socket-block"), filesystem ("allowlist-root": programs
        see a new root holding only the allowed paths; or "python-audit-hook": the in-process
        guards check the same allow-list), ipc ("per-program": each program gets a fresh IPC
        namespace; "host"), syscall_filter (programs cannot use keyrings or make namespaces),
        sandbox_uid (int or None), user_namespace,
        pid_namespace (the worker is pid 1 of its own PID namespace: nothing a program starts
        outlives it), host_pid, visible_paths (what programs may read besides their directory,
        /dev and /tmp), hidden_paths, guards (which in-process guards are on), notes.
        """
        return dict(self._all[0].isolation) if self._all else {}

    def run(self, code: str, stdin: str = "") -> ProgramResult:
        """Run one program with `stdin` as its standard input; never raises for program faults."""
        if not isinstance(code, str):
            raise TypeError(f"code must be a str, got {type(code).__name__}")
        if not isinstance(stdin, str):
            raise TypeError(f"stdin must be a str, got {type(stdin).__name__}")
        reply = self._call({"op": "run", "code": code, "stdin": stdin, "limits": self.limits.to_wire()})
        if "error" in reply:
            return ProgramResult("", reply["error"], None, False, "sandbox_error", 0.0)
        return ProgramResult(
            **{
                k: reply[k]
                for k in ("stdout", "stderr", "exit_code", "timed_out", "status", "wall_s", "cpu_s", "limit")
            }
        )

    def run_many(self, codes: list[str], stdin: list[str] | None = None) -> list[ProgramResult]:
        """Run programs concurrently over the worker pool; results come back in input order."""
        codes = list(codes)
        if stdin is None:
            stdin = [""] * len(codes)
        elif len(stdin) != len(codes):
            raise ValueError(f"run_many got {len(codes)} programs but {len(stdin)} stdin strings")
        if len(codes) <= 1:
            return [self.run(c, s) for c, s in zip(codes, stdin)]
        return list(self._pool().map(self.run, codes, stdin))

    def run_tests(self, program: str, tests: str, entry_point: str | None = None, setup: str = "") -> TestResult:
        """Grade `program` against ground-truth `tests`; never raises for program faults.

        tests: HumanEval style (defines `check(candidate)`; `entry_point` names the function to
            pass in) or MBPP style (a block of `assert` lines calling the program's functions).
        setup: trusted code run with the tests before them (imports, MBPP `test_setup_code`, or
            the HumanEval prompt so that its helper functions are the real ones, not the program's).

        Each top-level statement containing an `assert` is one unit (see judge.py); the tests run
        in a separate process from the program and see only plain-data results, so a program
        cannot fake a pass. Returns a TestResult whose pass_ratio is the reward signal.
        """
        for name, value in (("program", program), ("tests", tests), ("setup", setup)):
            if not isinstance(value, str):
                raise TypeError(f"{name} must be a str, got {type(value).__name__}")
        if entry_point is not None and not (isinstance(entry_point, str) and entry_point.isidentifier()):
            raise ValueError(f"entry_point must be a Python identifier or None, got {entry_point!r}")
        reply = self._call(
            {"op": "run_tests", "program": program, "entry_point": entry_point, "limits": self.limits.to_wire()},
            {"tests": tests, "setup": setup},
        )
        return self._test_result(reply)

    def run_untrusted_tests(self, program: str, steps: Sequence[tuple[str, bool]]) -> TestResult:
        """Grade `program` against tests that are themselves untrusted (e.g. written by a model).

        steps: (statement source, is a unit) pairs run in order in one namespace, where the
            program's top-level names are proxies as in `run_tests`; each unit records a verdict,
            and a failing non-unit step (an import, a helper) does not stop the steps after it.

        As in `run_tests`, the tests run in a judge process apart from the program and report
        over a pipe the program cannot reach, so the program cannot learn or forge a verdict.
        Unlike there, the judge confines itself like a program before it runs these tests.
        A step that does not parse makes the status "error" with no units.
        """
        if not isinstance(program, str):
            raise TypeError(f"program must be a str, got {type(program).__name__}")
        wire_steps = []
        for step in steps:
            if not (
                isinstance(step, (tuple, list))
                and len(step) == 2
                and isinstance(step[0], str)
                and isinstance(step[1], bool)
            ):
                raise TypeError(f"each step must be a (source str, is_unit bool) pair, got {step!r:.80}")
            wire_steps.append([step[0], step[1]])
        reply = self._call(
            {
                "op": "run_tests",
                "program": program,
                "entry_point": None,
                "untrusted": True,
                "limits": self.limits.to_wire(),
            },
            {"steps": wire_steps},
        )
        return self._test_result(reply)

    def run_untrusted_tests_many(self, jobs: list[tuple[str, Sequence[tuple[str, bool]]]]) -> list[TestResult]:
        """`run_untrusted_tests` for many (program, steps) jobs over the pool, in input order."""
        return list(self._pool().map(lambda job: self.run_untrusted_tests(*job), jobs))

    @staticmethod
    def _test_result(reply: dict[str, Any]) -> TestResult:
        if "results" not in reply:
            return TestResult(
                0, 0, "sandbox_error", error=reply.get("error", "no reply"), wall_s=reply.get("wall_s", 0.0)
            )
        cases = []
        for index, source in enumerate(reply["units"]):
            outcome = reply["results"][index]
            passed, error = outcome if outcome is not None else (False, "not run")
            cases.append(TestCaseResult(index, bool(passed), source, error))
        return TestResult(
            passed=sum(c.passed for c in cases),
            total=len(cases),
            status=reply["status"],
            cases=cases,
            program_stdout=reply["program_stdout"],
            program_stderr=reply["program_stderr"],
            error=reply["error"],
            wall_s=reply["wall_s"],
            program_loaded=reply.get("program_loaded", True),
        )

    def run_io_tests(self, program: str, cases: list[Any]) -> TestResult:
        """Grade a stdin/stdout program: one unit per case, each run as its own program.

        cases: objects with `input` and `output` attributes (e.g. teamrl.tasks.code_data.IOTest)
            or (input, output) pairs. Output is compared token-wise (iotests.outputs_match).
        Status is the worst program status seen ("ok" when every run exited normally).
        """
        pairs = [(c.input, c.output) if hasattr(c, "input") else (c[0], c[1]) for c in cases]
        if not pairs:
            return TestResult(0, 0, "error", error="no test cases")
        runs = self.run_many([program] * len(pairs), [inp for inp, _ in pairs])
        cases_out, status = [], "ok"
        for index, ((inp, expected), run) in enumerate(zip(pairs, runs)):
            passed = run.status == "ok" and outputs_match(expected, run.stdout)
            error = (
                ""
                if passed
                else (
                    f"status {run.status}: {run.stderr[-300:]}"
                    if run.status != "ok"
                    else f"wrong output: {run.stdout[:200]!r}"
                )
            )
            cases_out.append(TestCaseResult(index, passed, f"stdin: {inp[:200]!r}", error))
            if run.status not in ("ok", "error") and status in ("ok", "error"):
                status = run.status
        return TestResult(
            sum(c.passed for c in cases_out),
            len(cases_out),
            status,
            cases_out,
            program_stdout=runs[0].stdout,
            program_stderr=runs[0].stderr,
            wall_s=sum(r.wall_s for r in runs),
        )

    def run_tests_many(self, jobs: list[dict[str, Any]]) -> list[TestResult]:
        """`run_tests` for many jobs (dicts of its keyword arguments) over the pool, in input order."""
        return list(self._pool().map(lambda job: self.run_tests(**job), jobs))

    def close(self) -> None:
        """Stop the workers (and every program still running); idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True)
        finalizer = getattr(self, "_finalizer", None)
        if finalizer is not None:
            finalizer()
        else:
            Sandbox._shutdown(self._all, self._scratch, os.getpid())

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ internals

    @staticmethod
    def _shutdown(workers: list[WorkerHandle], scratch: str, owner_pid: int) -> None:
        if os.getpid() != owner_pid:
            return  # a forked copy of the grader exiting: the workers belong to the original
        for worker in workers:
            worker.close()
        shutil.rmtree(scratch, ignore_errors=True)

    def _pool(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._closed:
                raise SandboxError("this Sandbox is closed")
            if self._executor is None:
                self._executor = ThreadPoolExecutor(self.workers, thread_name_prefix="teamrl-sandbox")
            return self._executor

    def _call(self, *msgs: dict[str, Any]) -> dict[str, Any]:
        if self._closed:
            raise SandboxError("this Sandbox is closed")
        if os.getpid() != self._owner_pid:
            # Two processes writing to the same worker pipes would corrupt every request.
            raise SandboxError(
                "this Sandbox was created in another process (before a fork); create a new Sandbox in this process"
            )
        assert self.limits.wall_time_s is not None  # SandboxLimits.__post_init__ fills it in
        worker = self._idle.get()
        try:
            reply = worker.request(list(msgs), self.limits.wall_time_s + _REPLY_GRACE_S)
            if reply.get("tainted"):
                worker = self._replace(worker)
            return reply
        except (protocol.ProtocolError, OSError) as exc:
            worker = self._replace(worker)
            return {"error": f"sandbox worker failed: {exc}"}
        finally:
            self._idle.put(worker)

    def _replace(self, worker: WorkerHandle) -> WorkerHandle:
        """Kill a broken worker and start a fresh one in its place."""
        worker.kill()
        fresh = WorkerHandle(self._config).wait_ready()
        with self._lock:
            self._all[self._all.index(worker)] = fresh
        return fresh
