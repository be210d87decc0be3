"""What a program learns about the grader from /proc: no host path of the grader's, no worker argument.

A worker given its package directory (in the checkout) and configuration (`hide_paths`, the
fallback scratch directory, the grader's pid) as arguments shows them to every program as
/proc/1/cmdline and /proc/self/cmdline. So the worker's arguments are a fixed bootstrap (its
configuration comes through its request pipe), the namespace's /proc is mounted with hidepid=invisible (a
program sees only its own processes), and the worker has a cgroup namespace of its own (so
/proc/self/cgroup names no host cgroup).
"""

from __future__ import annotations

import json
import os
import textwrap

import pytest
import teamrl.sandbox
from teamrl.sandbox import Sandbox, SandboxLimits

PACKAGE_DIR = os.path.dirname(teamrl.sandbox.__file__)
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(PACKAGE_DIR)))
LIMITS = SandboxLimits(cpu_time_s=2.0, memory_mb=256, max_output_bytes=1_000_000)

# Reads everything under /proc a program can about other processes and itself.
LOOK_AROUND = textwrap.dedent("""
    import json, os
    seen = {"pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()), "self": os.getpid(), "files": {}}
    names = ["cmdline", "environ", "mountinfo", "mounts", "mountstats", "cgroup", "status", "comm", "maps"]
    for pid in ["self"] + [str(p) for p in seen["pids"]]:
        for name in names:
            try:
                with open(f"/proc/{pid}/{name}", "rb") as fh:
                    seen["files"][f"{pid}/{name}"] = fh.read().decode("utf-8", "replace")
            except OSError as exc:
                seen["files"][f"{pid}/{name}"] = f"unreadable: {exc.errno}"
    print(json.dumps(seen))
""")


def look_around(box: Sandbox) -> dict:
    res = box.run(LOOK_AROUND)
    assert res.status == "ok", res
    return json.loads(res.stdout)


def grader_strings(box: Sandbox) -> list[str]:
    """Host paths and values of the grader's that nothing inside should name.

    A path above something programs see (a checkout holding the Python installation in a
    virtual environment) is left out: `sys.prefix` names it anyway.
    """
    config = box._config
    found = [PACKAGE_DIR, REPO_ROOT, os.getcwd(), config["fallback_scratch"], f'"parent_pid": {os.getpid()}',
             "hide_paths"] + config["hide_paths"]
    visible = box.isolation["visible_paths"]
    return [s for s in found if s != "/" and not any(v == s or v.startswith(s.rstrip("/") + "/") for v in visible)]


@pytest.fixture(scope="module")
def box():
    with Sandbox(LIMITS, workers=1) as sandbox:
        if sandbox.isolation["sandbox_uid"] is None or not sandbox.isolation["pid_namespace"]:
            # Without a user id of their own programs run under the audit hook, which keeps them
            # out of /proc; without a PID namespace the new root has no /proc.
            pytest.skip("needs root and a PID namespace: elsewhere programs cannot read /proc at all")
        yield sandbox


def test_nothing_inside_names_a_grader_path_or_argument(box):
    seen = look_around(box)
    assert seen["files"]["self/mountinfo"].strip(), "the program could not read its own mountinfo"
    leaks = {(name, s) for name, text in seen["files"].items() for s in grader_strings(box) if s in text}
    assert leaks == set()


def test_a_program_sees_only_its_own_processes(box):
    seen = look_around(box)
    assert seen["pids"] == [seen["self"]], seen["pids"]  # not the worker (pid 1), nor another program


def test_the_cgroup_paths_inside_name_no_host_cgroup(box):
    seen = look_around(box)
    paths = [line.split(":", 2)[2] for line in seen["files"]["self/cgroup"].splitlines() if line.count(":") >= 2]
    assert paths and set(paths) == {"/"}, seen["files"]["self/cgroup"]


def test_a_programs_children_are_still_visible_to_it(box):
    code = textwrap.dedent("""
        import os, subprocess, sys
        child = subprocess.Popen([sys.executable, "-c", "print('up', flush=True); input()"],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        child.stdout.readline()
        print(open(f"/proc/{child.pid}/cmdline").read().split("\\0")[1:3])
        child.communicate("")
    """)
    res = box.run(code)
    assert (res.status, res.stdout) == ("ok", "['-c', \"print('up', flush=True); input()\"]\n"), res


def test_the_worker_says_which_mount_sources_programs_can_read():
    from teamrl.sandbox.isolation import sources_shown

    mountinfo = textwrap.dedent("""\
        45 68 0:42 / / ro,nosuid,nodev,relatime - tmpfs tmpfs rw,size=1024k,mode=755
        47 45 254:0 /usr/lib /usr/lib ro,relatime - ext4 /dev/vda rw
        48 45 254:1 /home/alice/work/.venv /work/.venv ro,relatime - ext4 /dev/vdb rw
        49 45 254:1 /home/alice/my\\040data /data ro,relatime - ext4 /dev/vdb rw
        52 45 0:6 /null /dev/null rw,relatime - devtmpfs devtmpfs rw
    """)
    bound = ["/usr/lib", "/work/.venv", "/data"]
    assert sources_shown(mountinfo, bound) == ["/work/.venv (from /home/alice/work/.venv)",
                                               "/data (from /home/alice/my data)"]


def test_the_note_matches_what_a_program_reads(box):
    from teamrl.sandbox.isolation import sources_shown

    mountinfo = look_around(box)["files"]["self/mountinfo"]
    shown = sources_shown(mountinfo, box.isolation["visible_paths"])
    notes = [n for n in box.isolation["notes"] if "mountinfo" in n]
    if shown:
        assert len(notes) == 1 and all(entry in notes[0] for entry in shown), (shown, notes)
    else:
        assert notes == []
