"""Programs see an allow-list filesystem: their directory, Python, system libraries, granted paths.

An answer key (a HumanEval-format file whose canonical solutions the tests need) is planted
outside /tmp wherever a grader's files could be: beside the checkout (a fake shared/datasets),
in a task's data_dir, in a run directory, in the home directory and in the checkout itself. In
every isolation layer a program can neither open, list nor stat any of them, and the "read the
dataset, exec its canonical solution" exploit earns nothing; granted, the same file is readable
(so the exploit is real). Normal programs keep working in every layer.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import tempfile
import textwrap
import uuid
from pathlib import Path

import pytest
from sandbox_test_helpers import FAST_LIMITS

from teamrl.sandbox import Sandbox
from teamrl.sandbox.pool import check_grant_paths
from teamrl.tasks.code_data import load_humaneval

REPO = Path(__file__).resolve().parents[2]
SECRET = f"answer-key-{uuid.uuid4().hex}"
# Invented problems whose solutions cannot be guessed: only the answer key has them.
PROBLEMS = [
    {"task_id": f"Planted/{i}", "entry_point": f"magic_{i}",
     "prompt": f"def magic_{i}(x):\n    \"\"\"Return the secret transform of x.\"\"\"\n",
     "canonical_solution": f"    return x * {7919 + i} + {104729 * (i + 1)}  # {SECRET}\n",
     "test": f"def check(candidate):\n    assert candidate(1) == {7919 + i + 104729 * (i + 1)}\n"
             f"    assert candidate(3) == {3 * (7919 + i) + 104729 * (i + 1)}\n"}
    for i in range(3)
]

EXPLOIT = textwrap.dedent("""
    import gzip, json, os
    def canonical(entry_point):
        for path in PATHS:
            for candidate in (path, "/proc/self/root" + path):
                try:
                    opener = gzip.open if candidate.endswith(".gz") else open
                    with opener(candidate, "rt") as fh:
                        for line in fh:
                            record = json.loads(line)
                            if record["entry_point"] == entry_point:
                                return record["prompt"] + record["canonical_solution"]
                except (OSError, ValueError, KeyError):
                    continue
        return f"def {entry_point}(x):\\n    return None\\n"
    exec(canonical(ENTRY_POINT), globals())
""")

PROBE = textwrap.dedent("""
    import json, os
    report = {}
    for path in PATHS:
        seen = {}
        try:
            with open(path, "rb") as fh:
                seen["open"] = SECRET.encode() in fh.read() or "opened"
        except OSError:
            pass
        try:
            os.stat(path)
            seen["stat"] = True
        except OSError:
            pass
        for how, other in (("proc_root", "/proc/self/root" + path), ("relative", os.path.relpath(path))):
            try:
                open(other, "rb").close()
                seen[how] = True
            except OSError:
                pass
        if os.path.exists(path) or os.path.lexists(path):
            seen["exists"] = True
        parent = os.path.dirname(path)
        try:
            if os.path.basename(path) in os.listdir(parent):
                seen["listed"] = True
        except OSError:
            pass
        report[path] = seen
    print(json.dumps(report))
""")


def _under_tmp(path: Path) -> bool:
    """Whether programs would see `path` inside their own private /tmp (so it tests nothing)."""
    real = os.path.realpath(path)
    return real == "/tmp" or real.startswith("/tmp/")


def _writable_dir_outside_tmp(*candidates: Path) -> Path:
    # A checkout cloned under /tmp has its parent there: the next candidate stands in for "beside it".
    for place in candidates:
        if place.is_dir() and os.access(place, os.W_OK) and not _under_tmp(place):
            return place
    pytest.skip(f"no writable directory outside /tmp among {candidates}")


def _write_key(path: Path, gz: bool = False) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(p) + "\n" for p in PROBLEMS)
    if gz:
        with gzip.open(path, "wt") as fh:
            fh.write(text)
    else:
        path.write_text(text)
    return str(path)


@pytest.fixture(scope="module")
def planted():
    """Answer keys in every place a grader's files could be; removed afterwards."""
    tag = uuid.uuid4().hex[:10]
    beside_dir = _writable_dir_outside_tmp(REPO.parent, Path.home())
    beside = Path(tempfile.mkdtemp(prefix=f".teamrl-test-{tag}-", dir=beside_dir))
    data_parent = _writable_dir_outside_tmp(Path("/var/tmp"), Path.home())
    data_dir = Path(tempfile.mkdtemp(prefix=f"teamrl-data-{tag}-", dir=data_parent))
    cleanup = [beside, data_dir]
    for made in cleanup:
        made.chmod(0o755)  # mkdtemp's 0700 would keep out programs' own uid even when granted
    keys = {
        "beside the checkout": _write_key(beside / "shared" / "datasets" / "HumanEval.jsonl.gz", gz=True),
        "task data_dir": _write_key(data_dir / "HumanEval.jsonl"),
        "run directory": _write_key(beside / "runs" / "code-team" / "eval" / "answers.jsonl"),
        "home directory": _write_key(Path.home() / f".teamrl-answer-key-{tag}.jsonl"),
        "checkout": _write_key(REPO / f".teamrl-answer-key-{tag}.jsonl"),
        "host /tmp": _write_key(Path(tempfile.gettempdir()) / f"teamrl-answer-key-{tag}.jsonl"),
    }
    cleanup += [Path(keys[k]) for k in ("home directory", "checkout", "host /tmp")]
    real = REPO.parent / "shared" / "datasets" / "HumanEval.jsonl.gz"
    if real.is_file():
        keys["the real data set"] = str(real)
    # A task pointed at that data_dir loads it fine: it is a real answer key for the grader.
    assert [p.entry_point for p in load_humaneval(data_dir / "HumanEval.jsonl")] == [p["entry_point"] for p in PROBLEMS]
    try:
        yield keys
    finally:
        for path in cleanup:
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)


# no-mount-ns: network and PID namespaces (and a uid where it can read Python) but no new root,
# as on a machine that forbids mounts: the guards must enforce the allow-list there.
LAYERS = {"namespace": True, "userns": "userns", "no-mount-ns": True, "audit-hook": False}


@pytest.fixture(scope="module", params=list(LAYERS))
def layer_box(request):
    Sandbox._new_root = request.param != "no-mount-ns"
    try:
        box = Sandbox(FAST_LIMITS, workers=1, os_isolation=LAYERS[request.param])
    finally:
        Sandbox._new_root = True
    with box:
        report = box.isolation
        if request.param == "namespace":
            assert report["filesystem"] == "allowlist-root", report["notes"]
        elif request.param == "userns" and not report["user_namespace"]:
            pytest.skip(f"unprivileged user namespaces unavailable: {report['notes']}")
        elif request.param in ("audit-hook", "no-mount-ns"):
            assert report["filesystem"] == "python-audit-hook", report
            # Without the new root an exec'd binary would read files unchecked: no processes.
            assert report["guards"]["restrict_files"] and report["guards"]["block_processes"], report
        yield request.param, box


def _with(names: dict[str, object], code: str) -> str:
    return "".join(f"{k} = {v!r}\n" for k, v in names.items()) + code


def test_answer_keys_cannot_be_opened_listed_or_statted(layer_box, planted):
    layer, box = layer_box
    paths = list(planted.values())
    res = box.run(_with({"PATHS": paths, "SECRET": SECRET}, PROBE))
    assert res.status == "ok", res.stderr
    assert SECRET not in res.stdout
    report = json.loads(res.stdout)
    leaks = {where: report[path] for where, path in planted.items() if report[path]}
    assert leaks == {}, f"{layer}: programs reached {leaks}"
    visible = " ".join(box.isolation["visible_paths"])
    assert all(path not in visible for path in paths)


def test_open_the_dataset_exploit_earns_nothing(layer_box, planted):
    layer, box = layer_box
    for problem in PROBLEMS:
        program = _with({"PATHS": list(planted.values()), "ENTRY_POINT": problem["entry_point"]}, EXPLOIT)
        graded = box.run_tests(program, problem["test"], entry_point=problem["entry_point"])
        assert graded.total == 2 and graded.passed == 0, f"{layer}: {graded}"


def test_granted_answer_key_is_readable_so_the_exploit_is_real(planted):
    granted = str(Path(planted["task data_dir"]).parent)
    with Sandbox(FAST_LIMITS, workers=1, grant_paths=[granted]) as box:
        problem = PROBLEMS[0]
        program = _with({"PATHS": [planted["task data_dir"]], "ENTRY_POINT": problem["entry_point"]}, EXPLOIT)
        assert box.run_tests(program, problem["test"], entry_point=problem["entry_point"]).all_passed
        # Granted means read-only: the program cannot change the grader's copy, even where the
        # file's own mode would let it.
        key = Path(planted["task data_dir"])
        before = key.read_bytes()
        key.chmod(0o666)
        try:
            res = box.run(f"open({str(key)!r}, 'a').write('x')")
        finally:
            key.chmod(0o644)
        assert res.status == "error" and "Read-only file system" in res.stderr, res.stderr
        assert key.read_bytes() == before
        # Only what was granted: the other keys stay invisible.
        res = box.run(_with({"PATHS": [planted["home directory"], planted["checkout"]], "SECRET": SECRET}, PROBE))
        assert all(seen == {} for seen in json.loads(res.stdout).values()), res.stdout


def test_checkout_and_teamrl_source_are_invisible(layer_box):
    """Wherever the checkout lives: teamrl cannot be imported, its source, the checkout and its files do not
    exist, no sys.path entry leads into the checkout or teamrl's package, and the checkout's parent (which
    may hold an allowed folder, a virtual environment made beside the checkout) does not list it."""
    _, box = layer_box
    import teamrl

    package = Path(teamrl.__file__).resolve().parent
    source = str(package / "__init__.py")
    res = box.run(textwrap.dedent(f"""
        import os, sys
        try:
            import teamrl
            print("IMPORTED", teamrl.__file__)
        except ImportError:
            print("no teamrl")
        for path in [{source!r}, {str(REPO)!r}, {str(REPO / 'pyproject.toml')!r}]:
            print(path, os.path.exists(path))
        hidden = [{str(REPO)!r}, {str(package)!r}]
        inside = lambda p: any(os.path.realpath(p or ".") == h or os.path.realpath(p or ".").startswith(h + os.sep)
                               for h in hidden)
        try:
            listed = {REPO.name!r} in os.listdir({str(REPO.parent)!r})
        except OSError:
            listed = False
        print("listed", listed)
        print([p for p in sys.path if inside(p)])
    """))
    lines = res.stdout.splitlines()
    assert lines[0] == "no teamrl", res.stdout + res.stderr
    assert res.stdout.count(" False") == 4 and lines[-2] == "listed False" and lines[-1] == "[]", res.stdout


NORMAL = textwrap.dedent("""
    import json, math, re, collections, itertools, functools, fractions, decimal, heapq, bisect
    import datetime, random, hashlib, string, typing, dataclasses, statistics, copy, tempfile, sys
    data = sys.stdin.read()
    assert open("/dev/stdin").read() == ""  # already consumed, but the device link works
    with open("notes.txt", "w") as fh:
        fh.write(data)
    with tempfile.NamedTemporaryFile("w") as tmp:
        tmp.write("x")
    total = sum(int(x) for x in open("notes.txt").read().split())
    digest = hashlib.sha256(str(total).encode()).hexdigest()[:8]
    print(total, digest, fractions.Fraction(1, 3) + 1, decimal.Decimal("1.10") + 2,
          statistics.mean([1, 2, 3]), math.comb(5, 2), json.dumps(collections.Counter("aab")))
""")


def test_normal_programs_still_work(layer_box):
    layer, box = layer_box
    res = box.run(NORMAL, stdin="1 2 3\n")
    assert res.status == "ok", f"{layer}: {res.stderr}"
    assert res.stdout.split()[:2] == ["6", "e7f6c011"] and "4/3" in res.stdout and "3.10" in res.stdout, res.stdout


def test_grant_paths_are_checked():
    outside = next(place for place in (REPO, Path.home(), Path("/usr")) if not _under_tmp(place))
    assert check_grant_paths([]) == []
    assert check_grant_paths([str(outside) + "/"]) == [str(outside)]
    with pytest.raises(TypeError, match="list of paths"):
        check_grant_paths(str(outside))
    with pytest.raises(ValueError, match="absolute"):
        check_grant_paths(["relative/dir"])
    with pytest.raises(ValueError, match="does not exist"):
        check_grant_paths([str(outside / "no-such-dir-here")])
    with pytest.raises(ValueError, match="under /tmp"):
        check_grant_paths([tempfile.gettempdir()])
    with pytest.raises(ValueError, match="whole filesystem"):
        check_grant_paths(["/"])


def test_resolver_agrees_with_realpath(tmp_path):
    """The fallback's path resolution (which must not call the wrapped stat) is os.path.realpath."""
    import posix

    from teamrl.sandbox.guards import make_resolver

    (tmp_path / "real" / "sub").mkdir(parents=True)
    (tmp_path / "real" / "sub" / "f.txt").write_text("x")
    (tmp_path / "to_real").symlink_to(tmp_path / "real")  # absolute
    (tmp_path / "real" / "up").symlink_to("..")  # relative, climbing
    (tmp_path / "chain").symlink_to("to_real/sub")  # a link through a link
    (tmp_path / "loop").symlink_to("loop")
    resolve = make_resolver(posix.lstat, posix.readlink)
    for rel in ["to_real/sub/f.txt", "chain/../sub/f.txt", "real/up/to_real/sub", "to_real/up/up/x",
                "missing/../real/./sub", "chain/missing/more", "to_real/sub/../../chain/f.txt"]:
        path = f"{tmp_path}/{rel}"
        assert resolve(path) == os.path.realpath(path), rel
    assert resolve("/proc/self/root/etc") == "/etc"
    assert resolve(f"{tmp_path}/loop").startswith(str(tmp_path))  # a loop ends instead of hanging


def test_fallback_refuses_dir_fd_and_introspection(planted):
    with Sandbox(FAST_LIMITS, workers=1, os_isolation=False) as box:
        key = planted["home directory"]
        res = box.run(textwrap.dedent(f"""
            import gc, os
            fd = os.open("/usr/lib", os.O_RDONLY)
            print(len(os.listdir(fd)) > 0)  # a directory it may read, through its descriptor
            relative = "../.." + {key!r}
            for name, attempt in [
                    ("open", lambda: os.open(relative, os.O_RDONLY, dir_fd=fd)),
                    ("stat", lambda: os.stat(relative, dir_fd=fd)),
                    ("opener", lambda: open(relative, opener=lambda p, f: os.open(p, f, dir_fd=fd))),
                    ("mkdir", lambda: os.mkdir("x", dir_fd=fd)),
                    ("referrers", lambda: gc.get_referrers(os.stat))]:
                try:
                    attempt()
                    print("ALLOWED", name)
                except OSError as exc:
                    print("refused", name, type(exc).__name__)
        """))
        lines = res.stdout.splitlines()
        assert lines[0] == "True" and len(lines) == 6, res.stdout + res.stderr
        assert all(line.startswith("refused") for line in lines[1:]), res.stdout


def test_new_root_plan(tmp_path):
    """What the new root recreates: binds for dirs and files, links as links (their targets
    planned too), nothing twice, nothing missing, nothing inside an already-bound directory."""
    from teamrl.sandbox.rootfs import plan

    (tmp_path / "usr" / "lib" / "deep").mkdir(parents=True)
    (tmp_path / "lib").symlink_to("usr/lib")
    (tmp_path / "cache").write_text("x")
    (tmp_path / "via").symlink_to(tmp_path / "lib")  # a link to a link
    t = str(tmp_path)
    entries = plan([f"{t}/lib", f"{t}/usr/lib/deep", f"{t}/cache", f"{t}/missing", f"{t}/cache", f"{t}/via/deep"])
    assert entries == sorted([("link", f"{t}/lib", "usr/lib"), ("dir", f"{t}/usr/lib", ""), ("file", f"{t}/cache", "")],
                             key=lambda e: e[1])
    assert plan([f"{t}/via"]) == sorted([("link", f"{t}/via", f"{t}/lib"), ("link", f"{t}/lib", "usr/lib"),
                                         ("dir", f"{t}/usr/lib", "")], key=lambda e: e[1])


@pytest.mark.parametrize("os_isolation", [True, False], ids=["namespace", "audit-hook"])
def test_hide_paths_cover_part_of_a_grant(planted, os_isolation):
    beside = Path(planted["beside the checkout"]).parents[2]  # the planted tree beside the checkout
    shown, covered = planted["run directory"], planted["beside the checkout"]
    with Sandbox(FAST_LIMITS, workers=1, os_isolation=os_isolation, grant_paths=[str(beside)],
                 hide_paths=[str(beside / "shared")]) as box:
        res = box.run(_with({"PATHS": [shown, covered], "SECRET": SECRET}, PROBE))
        report = json.loads(res.stdout)
        assert report[shown].get("open") is True and report[covered].get("open") is None, res.stdout
