"""Hostile programs: each must be contained, score nothing, and leave no process or file behind."""

from __future__ import annotations

import os
import socket
import textwrap
from pathlib import Path

import pytest
from sandbox_test_helpers import FAST_LIMITS, descendants, process_uids

from teamrl.sandbox import Sandbox, SandboxLimits

SECRET = "teamrl-test-secret-4f7c1e"


def _worker_pids(box: Sandbox) -> list[int]:
    return [w.worker_pid for w in box._all]


def assert_clean(box: Sandbox) -> None:
    """No program process survives and the workers' scratch space is empty."""
    for pid in _worker_pids(box):
        assert descendants(pid) == [], f"worker {pid} still has descendants"
    uid = box.isolation["sandbox_uid"]
    if uid is not None:
        for worker in box._all:
            assert process_uids(worker.isolation["sandbox_uid"]) == []
    scratch = box._scratch  # only used without a private /tmp
    if os.path.isdir(scratch):
        assert os.listdir(scratch) == []
    assert uid is None or not any(p.startswith("prog-") for p in os.listdir("/tmp"))


@pytest.fixture(scope="module")
def box():
    os.environ["TEAMRL_TEST_SECRET"] = SECRET  # the grader's environment holds a secret...
    try:
        with Sandbox(FAST_LIMITS, workers=2) as sandbox:
            yield sandbox
    finally:
        os.environ.pop("TEAMRL_TEST_SECRET", None)


def test_infinite_loop_times_out_and_pool_recovers(box):
    res = box.run("while True:\n    pass")
    assert res.status == "timeout" and res.timed_out
    assert_clean(box)
    assert box.run("print('alive')").stdout == "alive\n"


def test_fork_bomb_is_contained(box):
    if box.isolation["sandbox_uid"] is None:
        pytest.skip("no separate user id here: forking is blocked outright (see the fallback tests)")
    code = textwrap.dedent("""
        import os, time
        n = 0
        while True:
            try:
                if os.fork() == 0:
                    os.setsid()  # try to escape the process group too
                n += 1
            except OSError:
                time.sleep(0.01)
    """)
    res = box.run(code)
    assert res.status in ("timeout", "killed", "error")
    assert_clean(box)
    assert box.run("print('alive')").stdout == "alive\n"


def test_escaped_daemon_is_killed_and_does_not_delay_result(box):
    code = textwrap.dedent("""
        import os, sys, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                time.sleep(60)
            os._exit(0)
        print("parent done")
    """)
    if box.isolation["sandbox_uid"] is None:
        pytest.skip("forking is blocked in the fallback mode")
    res = box.run(code)
    assert res.stdout == "parent done\n" and res.status == "ok"
    assert res.wall_s < 1.0
    assert_clean(box)


def test_memory_bomb(box):
    res = box.run("chunks = []\nwhile True:\n    chunks.append(bytearray(10 * 1024 * 1024))")
    assert res.status == "memory"
    res = box.run("x = 'a' * (10 ** 10)")
    assert res.status == "memory"
    assert_clean(box)


def test_huge_output_is_capped(box):
    res = box.run("import sys\nwhile True:\n    sys.stdout.write('y' * 65536)\n    sys.stderr.write('z' * 65536)")
    assert res.status == "output_limit"
    assert len(res.stdout) <= FAST_LIMITS.max_output_bytes and len(res.stderr) <= FAST_LIMITS.max_output_bytes
    assert_clean(box)


def test_huge_file_is_capped():
    limits = SandboxLimits(wall_time_s=3.0, max_file_bytes=100_000)
    with Sandbox(limits, workers=1) as small:
        res = small.run("open('big.bin', 'wb').write(b'x' * 1_000_000)")
        assert res.status == "error" and "File too large" in res.stderr
        assert_clean(small)


def test_writes_outside_own_directory_fail(box, tmp_path):
    here = Path(__file__).resolve().parent
    targets = [here / "planted_by_program.txt", tmp_path / "planted.txt", Path("/tmp/planted_by_program.txt"),
               Path.home() / "planted_by_program.txt", Path("/var/tmp/planted_by_program.txt"),
               Path("/dev/shm/planted_by_program.txt")]
    code = textwrap.dedent(f"""
        import os
        results = []
        for path in {[str(t) for t in targets]!r}:
            try:
                with open(path, "w") as fh:
                    fh.write("pwned")
                results.append("WROTE " + path)
            except OSError as exc:
                results.append("blocked " + type(exc).__name__)
        open("inside.txt", "w").write("fine")  # its own directory is writable
        print(os.path.exists("inside.txt"))
        print("\\n".join(results))
    """)
    res = box.run(code)
    assert res.stdout.startswith("True\n"), res.stderr
    for target in targets:
        assert not target.exists(), f"program created {target}"
    # A write that only succeeded inside the worker's private /tmp must not be visible here either.
    assert_clean(box)


def test_previous_program_files_are_gone(box):
    first = box.run("import os\nopen('left.txt', 'w').write('x')\nprint(os.getcwd())")
    where = first.stdout.strip()
    second = box.run(f"import os\nprint(os.path.exists({where!r} + '/left.txt'), os.listdir('/tmp') if os.access('/tmp', os.R_OK) else '-')")
    assert second.stdout.startswith("False")
    assert not os.path.exists(os.path.join(where, "left.txt"))


def test_environment_is_scrubbed(box):
    code = textwrap.dedent(f"""
        import os
        print(sorted(os.environ))
        leaks = []
        for pid in ["1", str(os.getppid()), "{os.getpid()}", "self"]:
            try:
                data = open(f"/proc/{{pid}}/environ", "rb").read()
                if {SECRET!r}.encode() in data:
                    leaks.append(pid)
            except OSError:
                pass
        print("LEAK" if leaks else "no leak", leaks)
    """)
    res = box.run(code)
    assert SECRET not in res.stdout
    assert "no leak" in res.stdout, res.stdout + res.stderr
    names = eval(res.stdout.splitlines()[0])  # noqa: S307 - our own test output
    assert "TEAMRL_TEST_SECRET" not in names and "PATH" in names


def test_grader_files_and_memory_are_unreadable(box, tmp_path):
    secret_file = tmp_path / "ground_truth.txt"
    secret_file.write_text(SECRET)
    repo_file = Path(__file__).resolve()
    code = textwrap.dedent(f"""
        import os
        found = []
        for path in [{str(secret_file)!r}, {str(repo_file)!r}, "/proc/{os.getpid()}/mem", "/proc/{os.getpid()}/cmdline",
                     "/proc/{os.getpid()}/maps"]:
            try:
                data = open(path, "rb").read(1 << 20)
                found.append((path, {SECRET!r}.encode() in data or b"SECRET" in data or len(data)))
            except OSError as exc:
                found.append((path, "blocked"))
        print(found)
    """)
    res = box.run(code)
    assert SECRET not in res.stdout
    for line in eval(res.stdout):  # noqa: S307
        path, outcome = line
        if path.endswith("cmdline"):
            continue  # a process's command line is world-readable on Linux; it holds no secrets here
        assert outcome == "blocked", f"program could read {path}: {outcome}"


def test_network_is_unreachable(box):
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    code = textwrap.dedent(f"""
        import socket
        outcomes = []
        for addr in [("127.0.0.1", {port}), ("8.8.8.8", 53), ("1.1.1.1", 443)]:
            try:
                s = socket.create_connection(addr, timeout=1)
                outcomes.append("CONNECTED")
            except OSError as exc:
                outcomes.append(type(exc).__name__)
        print(outcomes)
    """)
    res = box.run(code)
    server.setblocking(False)
    try:
        server.accept()  # a completed connection would be waiting in the backlog
        reached = True
    except BlockingIOError:
        reached = False
    finally:
        server.close()
    assert not reached, "the program reached the grader's socket"
    assert "CONNECTED" not in res.stdout and res.stdout.startswith("["), res.stderr


def test_cannot_kill_worker_or_grader(box):
    code = f"import os, signal\nfor pid in (os.getppid(), {os.getpid()}, 1):\n    try:\n        os.kill(pid, signal.SIGKILL)\n        print('KILLED', pid)\n    except OSError as exc:\n        print('blocked', type(exc).__name__)"
    res = box.run(code)
    assert "KILLED" not in res.stdout, res.stdout
    assert box.run("print('alive')").stdout == "alive\n"


def test_setuid_binaries_give_nothing(box):
    if box.isolation["sandbox_uid"] is None:
        pytest.skip("no separate user id here")
    res = box.run("import os\nprint(os.getuid(), os.geteuid())")
    uid = box.isolation["sandbox_uid"]
    assert res.stdout.split() != ["0", "0"]
    assert all(int(x) >= uid for x in res.stdout.split())


def test_all_clean_at_the_end(box):
    box.run_many(["import os\nos.fork() if hasattr(os, 'fork') else None\nprint(1)"] * 8)
    assert_clean(box)


# ------------------------------------------------------------------ fallback (no namespaces, no uid)


@pytest.fixture(scope="module")
def fallback_box():
    with Sandbox(FAST_LIMITS, workers=1, os_isolation=False) as sandbox:
        yield sandbox


def test_fallback_report(fallback_box):
    report = fallback_box.isolation
    assert report["network"] == "python-socket-block"
    assert report["filesystem"] == "python-audit-hook"
    assert report["sandbox_uid"] is None


def test_fallback_blocks_sockets_forks_and_outside_writes(fallback_box, tmp_path):
    code = textwrap.dedent(f"""
        import os, socket
        def attempt(name, fn):
            try:
                fn()
                print("ALLOWED", name)
            except (OSError, RuntimeError) as exc:
                print("blocked", name, type(exc).__name__)
        attempt("socket", lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM))
        attempt("fork", os.fork)
        attempt("system", lambda: os.system("true"))
        attempt("write", lambda: open({str(tmp_path / 'x.txt')!r}, "w"))
        attempt("kill", lambda: os.kill(os.getppid(), 9))
        attempt("ctypes", lambda: __import__("ctypes"))
        attempt("socketpair", lambda: socket.socketpair())
        attempt("own dir", lambda: open("ok.txt", "w").write("x"))
    """)
    res = fallback_box.run(code)
    lines = res.stdout.splitlines()
    assert [line.split()[0] for line in lines] == ["blocked"] * 6 + ["ALLOWED"] * 2, res.stdout + res.stderr
    assert not (tmp_path / "x.txt").exists()
    assert_clean(fallback_box)
    assert fallback_box.run("print('alive')").stdout == "alive\n"


def test_fallback_env_scrubbed_and_loop_killed(fallback_box):
    os.environ["TEAMRL_TEST_SECRET"] = SECRET
    try:
        res = fallback_box.run("import os\nprint(dict(os.environ))")
        assert SECRET not in res.stdout  # workers started before the secret still only have PATH
    finally:
        os.environ.pop("TEAMRL_TEST_SECRET", None)
    assert fallback_box.run("while True: pass").status == "timeout"
    assert_clean(fallback_box)


# ------------------------------------------------------------------ unprivileged user namespace


def test_user_namespace_path(tmp_path):
    """What a non-root machine with user namespaces gets (forced here even though we are root)."""
    with Sandbox(FAST_LIMITS, workers=1, os_isolation="userns") as userns:
        report = userns.isolation
        if not report["user_namespace"]:
            pytest.skip(f"unprivileged user namespaces unavailable: {report['notes']}")
        assert report["network"] == "netns" and report["filesystem"] == "allowlist-root"
        code = textwrap.dedent(f"""
            import os, socket
            for path in [{str(Path(__file__).resolve().parent / 'planted.txt')!r}, {str(tmp_path / 'p.txt')!r}, "/etc/planted"]:
                try:
                    open(path, "w")
                    print("WROTE", path)
                except OSError as exc:
                    print("blocked", type(exc).__name__)
            try:
                socket.create_connection(("8.8.8.8", 53), timeout=1)
                print("CONNECTED")
            except OSError as exc:
                print("blocked", type(exc).__name__)
            try:
                os.fork()
                print("FORKED")
            except OSError as exc:
                print("blocked", type(exc).__name__)
        """)
        res = userns.run(code)
        assert res.stdout.split("\n")[:-1] == [line for line in res.stdout.split("\n")[:-1] if line.startswith("blocked")]
        assert res.stdout.count("blocked") == 5, res.stdout + res.stderr
        assert "guards.py" not in res.stderr
        assert userns.run_tests("def f(x):\n    return x", "assert f(1) == 1\nassert f(2) == 3").passed == 1
        assert_clean(userns)


def test_worker_crash_is_recovered(box):
    victim = box._all[0]
    victim.proc.kill()
    victim.proc.wait()
    results = box.run_many(["print('after')"] * 4)
    # The call that met the dead worker reports a sandbox error; every later one works.
    assert all(r.stdout == "after\n" or r.status == "sandbox_error" for r in results)
    assert sum(r.status == "sandbox_error" for r in results) <= 1
    assert all(r.stdout == "after\n" for r in box.run_many(["print('after')"] * 4))
    assert_clean(box)
