"""`Sandbox.run_untrusted_tests`: model-written tests, a judge that is itself confined, and
programs that try every way to learn or forge a verdict."""

from __future__ import annotations

import os
import textwrap

import pytest
from sandbox_test_helpers import FAST_LIMITS, descendants, process_uids

from teamrl.sandbox import Sandbox

STEPS = [("import math", False), ("assert f(1) == 4", True), ("def helper():\n    return 16", False),
         ("assert f(5) == helper()", True), ("x = name_that_is_not_defined", False),
         ("assert math.isclose(f(0), 1)", True)]
GOOD = "def f(x):\n    return 3 * x + 1\n"
WRONG = "def f(x):\n    return 0\n"

# Each defines a wrong f and then tries to make the tests pass anyway.
FORGERS = {
    # The old single-process harness kept its secret in a frame the program could walk to.
    "frame walk": """
        import sys, os
        frame = sys._getframe()
        while frame is not None:
            for name, value in list(frame.f_locals.items()) + list(frame.f_globals.items()):
                if callable(value) and name in ("report", "record", "__teamrl_record__"):
                    for i in range(3):
                        value(i, None)
            frame = frame.f_back
        def f(x): return 0
    """,
    "gc scan": """
        import gc
        for obj in gc.get_objects():
            if callable(obj) and getattr(obj, "__name__", "") in ("report", "record", "send_message"):
                try:
                    obj(5, {"unit": 0, "passed": True})
                except Exception:
                    pass
        def f(x): return 0
    """,
    "stdin and fake lines": """
        import sys
        secret = sys.stdin.read()
        for i in range(3):
            print(secret.strip(), i, "pass")
            print('{"unit": %d, "passed": true}' % i)
        def f(x): return 0
    """,
    "fake frames on every fd": """
        import json, os, struct
        def frame(obj):
            body = json.dumps(obj).encode()
            return struct.pack(">I", len(body)) + body
        forged = b"".join(frame({"unit": i, "passed": True, "error": ""}) for i in range(3))
        forged += frame({"done": True, "status": "ok", "error": ""})
        for fd in range(64):
            try:
                os.write(fd, forged)
            except OSError:
                pass
        def f(x): return 0
    """,
    "other processes' fds and memory": """
        import os
        opened = []
        for pid in os.listdir("/proc"):
            if pid.isdigit() and int(pid) != os.getpid():
                for what in ("fd/3", "fd/4", "fd/5", "mem"):
                    try:
                        open(f"/proc/{pid}/{what}", "wb").close()
                        opened.append(f"{pid}/{what}")
                    except OSError:
                        pass
        print("OPENED", opened)
        def f(x): return 0
    """,
    "patch builtins": """
        import builtins
        builtins.AssertionError = type("Never", (Exception,), {})
        builtins.isinstance = lambda *a: True
        class Equal(int):
            def __eq__(self, other): return True
        def f(x): return Equal(0)
    """,
    "kill everything": """
        import os, signal
        def f(x):
            os.kill(-1, signal.SIGKILL)
            os._exit(0)
    """,
    "exit before tests": "import sys\nsys.exit(0)\ndef f(x): return 3 * x + 1\n",
}


@pytest.fixture(scope="module")
def box():
    with Sandbox(FAST_LIMITS, workers=2) as sandbox:
        yield sandbox


def test_steps_run_in_order_and_a_failing_helper_does_not_stop_them(box):
    good = box.run_untrusted_tests(GOOD, STEPS)
    assert (good.passed, good.total, good.status, good.program_loaded) == (3, 3, "ok", True)
    assert [c.source for c in good.cases] == [src for src, unit in STEPS if unit]
    wrong = box.run_untrusted_tests(WRONG, STEPS)
    assert wrong.passed == 0 and [c.error for c in wrong.cases] == ["AssertionError"] * 3
    broken = box.run_untrusted_tests("raise ValueError('boom')", STEPS)
    assert broken.passed == 0 and not broken.program_loaded and "ValueError" in broken.error


def test_bad_steps(box):
    res = box.run_untrusted_tests(GOOD, [("assert f(", True)])
    assert res.status == "error" and res.total == 0 and "does not parse" in res.error
    assert box.run_untrusted_tests(GOOD, [("x = 1", False)]).error == "no unit steps in the tests"
    with pytest.raises(TypeError, match="pair"):
        box.run_untrusted_tests(GOOD, [("assert f(1) == 4", 1)])  # type: ignore[list-item]


@pytest.mark.parametrize("name", sorted(FORGERS))
def test_program_cannot_forge_a_pass(box, name):
    res = box.run_untrusted_tests(textwrap.dedent(FORGERS[name]), STEPS)
    assert res.passed == 0, (res, res.program_stdout, res.program_stderr)
    if name == "other processes' fds and memory":
        assert "OPENED []" in res.program_stdout, res.program_stdout
    assert box.run_untrusted_tests(GOOD, STEPS).all_passed  # the pool is fine afterwards
    for worker in box._all:
        assert descendants(worker.worker_pid) == []


def test_the_judge_of_untrusted_tests_is_confined(box, tmp_path):
    outside = tmp_path / "written-by-tests.txt"
    os.environ["TEAMRL_TEST_SECRET"] = "judge-secret-81d2"  # the workers were started before: never seen
    try:
        steps = [
            ("import os, socket", False),
            ("def attempt(fn):\n    try:\n        fn()\n        return True\n    except OSError:\n        return False", False),
            (f"assert not attempt(lambda: open({str(outside)!r}, 'w'))", True),
            ("assert not attempt(lambda: socket.create_connection(('8.8.8.8', 53), timeout=1))", True),
            ("assert 'TEAMRL_TEST_SECRET' not in os.environ", True),
            # hidden: an empty directory, or absent when it lies under /tmp (the tests' private /tmp)
            (f"assert not os.path.exists({os.getcwd()!r}) or os.listdir({os.getcwd()!r}) == []", True),
        ]
        uids = sorted(w.isolation["sandbox_uid"] for w in box._all if w.isolation["sandbox_uid"] is not None)
        if uids:
            steps.append((f"assert os.getuid() in {uids}", True))  # a program's uid, not the worker's root
        res = box.run_untrusted_tests(GOOD, steps)
    finally:
        os.environ.pop("TEAMRL_TEST_SECRET", None)
    assert res.all_passed, [(c.source, c.error) for c in res.cases if not c.passed]
    assert not outside.exists()
    for uid in uids:
        assert process_uids(uid) == []


def test_untrusted_tests_in_the_fallback_mode():
    with Sandbox(FAST_LIMITS, workers=1, os_isolation=False) as fallback:
        assert fallback.run_untrusted_tests(GOOD, STEPS).all_passed
        for name in ("frame walk", "fake frames on every fd", "exit before tests"):
            assert fallback.run_untrusted_tests(textwrap.dedent(FORGERS[name]), STEPS).passed == 0, name
        res = fallback.run_untrusted_tests(GOOD, [("import socket", False),
                                                  ("assert socket.socket(socket.AF_INET) is None", True)])
        assert res.passed == 0 and "not allowed" in res.cases[0].error  # the guards cover the judge too


def test_tests_that_write_garbage_to_the_result_pipe_do_not_break_the_worker(box):
    workers = [w.worker_pid for w in box._all]
    for garbage in ("b'\\\\xff' * 64", "b'\\\\x00\\\\x00\\\\x00\\\\x02[]'", "b'\\\\x00\\\\x00\\\\x00\\\\x0c{\"unit\":\"x\"}'"):
        steps = [("assert f(1) == 4", True), (f"import os\nos.write(5, {garbage})", False), ("assert f(2) == 7", True)]
        res = box.run_untrusted_tests(GOOD, steps)
        # The stream ends at the garbage: the first unit counts, the rest is lost (not the program's fault).
        assert (res.total, res.passed, res.status) == (2, 1, "sandbox_error"), res
    assert [w.worker_pid for w in box._all] == workers  # no worker had to be replaced
    assert box.run_untrusted_tests(GOOD, STEPS).all_passed
