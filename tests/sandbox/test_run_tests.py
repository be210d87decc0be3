"""Sandbox.run_tests: counting units, both test styles, and programs that try to fake a pass."""

from __future__ import annotations

import textwrap

import pytest
from sandbox_test_helpers import FAST_LIMITS, descendants

from teamrl.sandbox import Sandbox, SandboxLimits, TestResult

HE_TESTS = textwrap.dedent("""
    METADATA = {"author": "test"}

    def check(candidate):
        assert candidate(1, 2) == 3
        assert candidate(-1, 1) == 0
        for i in range(5):
            assert candidate(i, i) == 2 * i
        assert candidate(10, 5) == 15, "ten plus five"
""")
GOOD = "def add(a, b):\n    return a + b\n"
MBPP_TESTS = 'assert add(1, 2) == 3\nassert add("a", "b") == "ab"\nassert add([1], [2]) == [1, 2]\nassert add(0.5, 0.25) == 0.75'
MARKER = "GROUND_TRUTH_MARKER_93b1"


@pytest.fixture(scope="module")
def box():
    with Sandbox(FAST_LIMITS, workers=2) as sandbox:
        yield sandbox


def test_humaneval_style_counts_top_level_units(box):
    res = box.run_tests(GOOD, HE_TESTS, "add")
    assert isinstance(res, TestResult)
    assert (res.passed, res.total, res.status) == (4, 4, "ok"), res
    assert res.all_passed and res.pass_ratio == 1.0
    assert res.cases[2].source.startswith("for i in range(5):")
    wrong = box.run_tests("def add(a, b):\n    return a + b if a >= 0 else 99", HE_TESTS, "add")
    assert (wrong.passed, wrong.total) == (3, 4)
    assert not wrong.cases[1].passed and "AssertionError" in wrong.cases[1].error


def test_mbpp_style_counts_each_assert(box):
    res = box.run_tests(GOOD, MBPP_TESTS)
    assert (res.passed, res.total, res.status) == (4, 4, "ok")
    half = box.run_tests("def add(a, b):\n    return a + b if isinstance(a, int) else None", MBPP_TESTS)
    assert (half.passed, half.total) == (1, 4)


def test_program_output_is_reported(box):
    res = box.run_tests("print('hi')\nimport sys\nprint('warn', file=sys.stderr)\n" + GOOD, MBPP_TESTS)
    assert res.program_stdout == "hi\n" and res.program_stderr == "warn\n" and res.all_passed


def test_main_guard_does_not_run(box):
    program = GOOD + "if __name__ == '__main__':\n    print(add(int(input()), 1))\n"
    assert box.run_tests(program, MBPP_TESTS).all_passed


def test_program_exceptions_map_to_builtin_types(box):
    program = "def f(x):\n    if x < 0:\n        raise ValueError('neg')\n    return x\n"
    tests = textwrap.dedent("""
        try:
            f(-1)
            assert False
        except ValueError:
            pass
        assert f(2) == 2
        assert f(-5) == -5
    """)
    res = box.run_tests(program, tests)
    assert (res.passed, res.total) == (2, 3)
    assert "ValueError: neg" in res.cases[2].error


def test_trusted_setup_wins_over_program_helpers(box):
    prompt = "def poly(xs, x):\n    return sum(c * x ** i for i, c in enumerate(xs))\n\ndef find_zero(xs):\n    '''stub'''\n"
    tests = "def check(candidate):\n    assert abs(poly([1, 2], candidate([1, 2]))) < 1e-6\n"
    cheat = "def poly(xs, x):\n    return 0\n\ndef find_zero(xs):\n    return 12345.0\n"
    honest = "def find_zero(xs):\n    return -xs[0] / xs[1]\n"
    assert box.run_tests(cheat, tests, "find_zero", setup=prompt).passed == 0
    assert box.run_tests(honest, tests, "find_zero", setup=prompt).passed == 1
    # Without the trusted prompt the program's own helper is used, as in a plain exec-based grader.
    assert box.run_tests(cheat, tests, "find_zero").passed == 1


def test_program_imports_are_real_modules_for_the_tests(box):
    program = "import math\nclass FakeMath:\n    isclose = staticmethod(lambda *a, **k: True)\ndef area(r):\n    return 1.0\n"
    tests = "assert math.isclose(area(1), 3.14159, rel_tol=1e-3)\n"
    assert box.run_tests(program, tests).passed == 0  # `math` resolves to the real module
    program2 = "math = type('M', (), {'isclose': staticmethod(lambda *a, **k: True)})()\ndef area(r):\n    return 1.0\n"
    assert box.run_tests(program2, tests).passed == 0  # a fake `math` object is not plain data


def test_classes_and_objects_from_the_program(box):
    program = textwrap.dedent("""
        class Pair:
            def __init__(self, a, b):
                self.a, self.b = a, b
        def max_chain_length(pairs, n):
            pairs = sorted(pairs, key=lambda p: p.b)
            count, end = 0, float('-inf')
            for p in pairs:
                if p.a > end:
                    count, end = count + 1, p.b
            return count
        def evens(n):
            return (i for i in range(n) if i % 2 == 0)
    """)
    tests = ("assert max_chain_length([Pair(5, 24), Pair(15, 25), Pair(27, 40), Pair(50, 60)], 4) == 3\n"
             "assert list(evens(7)) == [0, 2, 4, 6]\n"
             "assert Pair(1, 2).b == 2\n")
    res = box.run_tests(program, tests)
    assert (res.passed, res.total) == (3, 3), res


def test_tests_that_do_not_parse_or_have_no_asserts(box):
    bad = box.run_tests(GOOD, "assert add(1,")
    assert bad.status == "error" and "do not parse" in bad.error and bad.total == 0
    empty = box.run_tests(GOOD, "x = 1\n")
    assert empty.status == "error" and "no assert" in empty.error
    no_entry = box.run_tests(GOOD, HE_TESTS)
    assert no_entry.status == "error" and "entry_point" in no_entry.error


def test_program_that_fails_to_load(box):
    res = box.run_tests("def add(a, b):\n  return a +", MBPP_TESTS)
    assert (res.passed, res.total, res.status) == (0, 4, "error")
    assert "SyntaxError" in res.program_stderr


# ------------------------------------------------------------------ hostile programs


@pytest.mark.parametrize("program", [
    "import sys\nsys.exit(0)\n" + GOOD,
    "import os\nos._exit(0)\n" + GOOD,
    GOOD + "import os\nos._exit(0)\n",
    "def add(a, b):\n    import os\n    os._exit(0)\n",
    "def add(a, b):\n    raise SystemExit(0)\n",
    "def add(a, b):\n    exit()\n",
])
def test_early_exit_never_passes(box, program):
    res = box.run_tests(program, MBPP_TESTS)
    assert res.passed == 0 and res.total == 4, res


@pytest.mark.parametrize("program", [
    "class Yes:\n    def __eq__(self, other): return True\n    def __bool__(self): return True\n"
    "def add(a, b):\n    return Yes()\n",
    "class Yes(int):\n    def __eq__(self, other): return True\n    __hash__ = int.__hash__\n"
    "def add(a, b):\n    return Yes(-7)\n",
    "class Yes(str):\n    def __eq__(self, other): return True\n    __hash__ = str.__hash__\n"
    "def add(a, b):\n    return Yes('nope')\n",
    "class Yes(list):\n    def __eq__(self, other): return True\n"
    "def add(a, b):\n    return Yes()\n",
    "def add(a, b):\n    return float('nan')\n",
])
def test_always_equal_objects_are_contained(box, program):
    res = box.run_tests(program, MBPP_TESTS)
    assert res.passed == 0, res
    he = box.run_tests(program, HE_TESTS, "add")
    assert he.passed == 0, he


def test_truthy_objects_cannot_pass_boolean_asserts(box):
    program = "class T:\n    def __bool__(self): return True\ndef is_even(n):\n    return T()\n"
    res = box.run_tests(program, "assert is_even(2)\nassert not is_even(3)\n")
    # Asking the object for its truth value is no stronger than returning a bool: the constant-True
    # answer passes `assert is_even(2)` and fails `assert not is_even(3)`, as `return True` would.
    assert (res.passed, res.total) == (1, 2)


@pytest.mark.parametrize("program", [
    # Patch the assert machinery and builtins of its own process.
    "import builtins\nclass Never(Exception): pass\nbuiltins.AssertionError = Never\n"
    "builtins.print = lambda *a, **k: None\nbuiltins.exit = lambda *a: None\n"
    "builtins.isinstance = lambda *a: True\nbuiltins.len = lambda x: 0\n"
    "def add(a, b):\n    return None\n",
    # Shadow builtins the tests use, hoping the tests pick them up.
    "def abs(x):\n    return 0\ndef len(x):\n    return 0\ndef add(a, b):\n    return None\n",
    # Look for the harness / report function in its own memory and call it.
    "import gc, sys\nfor obj in gc.get_objects():\n    if callable(obj) and 'record' in getattr(obj, '__name__', ''):\n"
    "        try:\n            obj(0, None)\n        except Exception:\n            pass\n"
    "for name in list(sys.modules):\n    if 'teamrl' in name or 'judge' in name:\n        print('FOUND', name)\n"
    "def add(a, b):\n    return None\n",
    # Write fake result frames to every descriptor it has.
    "import os, json, struct\nfor fd in range(3, 20):\n    for msg in ({'unit': 0, 'passed': True}, {'done': True, 'status': 'ok'}):\n"
    "        body = json.dumps(msg).encode()\n        try:\n            os.write(fd, struct.pack('>I', len(body)) + body)\n"
    "        except OSError:\n            pass\n"
    "def add(a, b):\n    return None\n",
])
def test_harness_tampering_has_no_effect(box, program):
    res = box.run_tests(program, MBPP_TESTS)
    assert res.passed == 0, res
    assert "FOUND" not in res.program_stdout


def test_program_cannot_see_the_tests(box):
    tests = f"# {MARKER}\nassert add(1, 2) == 3  # {MARKER}\nassert add(5, 5) == 10\n"
    spy = textwrap.dedent(f"""
        import gc, os, sys
        found = []
        marker = "{MARKER[::-1]}"[::-1]
        def leaks(value):
            return isinstance(value, (str, bytes)) and value is not marker and marker in str(value)
        for obj in gc.get_objects():  # every container and code object reachable in this process
            try:
                items = obj.values() if isinstance(obj, dict) else obj if isinstance(obj, (list, tuple, set)) else ()
                if any(leaks(x) for x in items):
                    found.append(type(obj).__name__)
                if hasattr(obj, "co_consts") and any(leaks(c) for c in obj.co_consts):
                    found.append("code")
            except Exception:
                pass
        frame = sys._getframe()
        while frame is not None:  # the stack we were called from (the worker's frames)
            if any(leaks(v) for v in frame.f_locals.values()) or any(leaks(c) for c in frame.f_code.co_consts):
                found.append("frame")
            frame = frame.f_back
        import select
        for fd in range(0, 32):
            try:
                if select.select([fd], [], [], 0)[0] and marker.encode() in os.read(fd, 1 << 20):
                    found.append(f"fd{{fd}}")
            except OSError:
                pass
        for pid in os.listdir("/proc"):
            for name in ("cmdline", "environ", "mem"):
                try:
                    if marker.encode() in open(f"/proc/{{pid}}/{{name}}", "rb").read(1 << 20):
                        found.append(f"/proc/{{pid}}/{{name}}")
                except OSError:
                    pass
        print("FOUND" if found else "nothing", found)
        def add(a, b):
            return a + b
    """)
    res = box.run_tests(spy, tests)
    assert "nothing" in res.program_stdout, res.program_stdout + res.program_stderr
    assert res.passed == 2


def test_partial_credit_survives_a_timeout(box):
    program = "def f(x):\n    while x < 0:\n        pass\n    return x\n"
    res = box.run_tests(program, "assert f(1) == 1\nassert f(2) == 2\nassert f(-1) == -1\nassert f(3) == 3\n")
    assert (res.passed, res.total, res.status) == (2, 4, "timeout")
    assert res.wall_s < FAST_LIMITS.wall_time_s + 1


def test_output_flood_and_memory_bomb_in_a_call(box):
    flood = box.run_tests("def add(a, b):\n    while True:\n        print('x' * 10000)\n", MBPP_TESTS)
    assert flood.passed == 0 and flood.status == "output_limit"
    bomb = box.run_tests("def add(a, b):\n    return 'x' * (10 ** 10)\n", MBPP_TESTS)
    assert bomb.passed == 0 and "MemoryError" in bomb.cases[0].error


def test_huge_return_value(box):
    res = box.run_tests("def add(a, b):\n    return list(range(2_000_000))\n", MBPP_TESTS)
    assert res.passed == 0


def test_fork_bomb_in_program_then_clean(box):
    program = "import os\nfor _ in range(50):\n    try:\n        os.fork()\n    except OSError:\n        pass\n" + GOOD
    res = box.run_tests(program, MBPP_TESTS)
    assert res.total == 4  # forked copies share the channel; whatever happens, nothing is left over
    for worker in box._all:
        assert descendants(worker.worker_pid) == []
    assert box.run_tests(GOOD, MBPP_TESTS).all_passed


def test_run_tests_many_in_order(box):
    jobs = [{"program": GOOD if i % 2 == 0 else "def add(a, b):\n    return 0", "tests": MBPP_TESTS} for i in range(10)]
    results = box.run_tests_many(jobs)
    assert [r.passed for r in results] == [4 if i % 2 == 0 else 0 for i in range(10)]


def test_fallback_mode_run_tests():
    with Sandbox(FAST_LIMITS, workers=1, os_isolation=False) as fallback:
        assert fallback.run_tests(GOOD, HE_TESTS, "add").all_passed
        assert fallback.run_tests("import os\nos._exit(0)", MBPP_TESTS).passed == 0
        res = fallback.run_tests("class Y:\n    def __eq__(s, o): return True\ndef add(a, b):\n    return Y()", MBPP_TESTS)
        assert res.passed == 0


def test_bad_arguments(box):
    with pytest.raises(ValueError, match="entry_point"):
        box.run_tests(GOOD, HE_TESTS, "not an identifier")
    with pytest.raises(TypeError, match="tests must be a str"):
        box.run_tests(GOOD, None)  # type: ignore[arg-type]


def test_limits_apply_to_cpu_heavy_tests():
    with Sandbox(SandboxLimits(wall_time_s=5, cpu_time_s=1), workers=1) as small:
        res = small.run_tests("def f():\n    while True:\n        pass\n", "assert f() is None\n")
        assert res.status == "timeout" and res.passed == 0
