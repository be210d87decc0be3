"""The worker's process-wide isolation: which layers the kernel and our privileges allow (stdlib only).

The worker calls `setup_worker` once at start. It turns on what the kernel and our privileges
allow and returns a report of what is active:

* network: a new, empty network namespace (`unshare(CLONE_NEWNET)`), so sockets reach nothing;
  otherwise the child blocks socket creation from Python (see `child.py`).
* filesystem: a new mount namespace whose root is a fresh tmpfs holding, read-only, only what
  programs may see (rootfs.py: the Python installation, system libraries, granted paths), a few
  device nodes and a private /tmp for the per-program directories; the old root is detached.
  Everything else (data sets, the checkout, home directories, other runs) is simply not there.
* user id: programs run under a user id of their own (one per worker), which makes
  RLIMIT_NPROC effective and lets the worker kill every process of a program in one atomic
  `kill(-1)` from that user id.
* processes: the worker becomes pid 1 of a PID namespace of its own (pidns.py), so every
  process a program starts dies with the worker, however the worker ends.
* cgroups: a cgroup namespace of its own, so /proc/self/cgroup shows "/" instead of the
  grader's cgroup paths.
* IPC: an IPC namespace of its own for the worker, and a fresh one for every program (child.py),
  so SysV IPC objects and POSIX message queues neither persist between programs nor reach the host.
* system calls: a seccomp filter (syscall_filter.py) that programs install on themselves refuses
  keyrings and new namespaces.
* without root, an unprivileged user namespace is tried to get the network, PID, IPC and mount
  namespaces anyway.

The system calls themselves (libc, numbers, flags) live in linux.py, below every module here.
"""

from __future__ import annotations

import errno
import os
from typing import Any

from . import pidns, rootfs, syscall_filter
from .linux import (
    CLONE_NEWCGROUP,
    CLONE_NEWIPC,
    CLONE_NEWNET,
    CLONE_NEWNS,
    CLONE_NEWUSER,
    MS_BIND,
    MS_NOATIME,
    MS_NODEV,
    MS_NODIRATIME,
    MS_NOEXEC,
    MS_NOSUID,
    MS_PRIVATE,
    MS_RDONLY,
    MS_REC,
    MS_RELATIME,
    MS_REMOUNT,
    MS_STRICTATIME,
    PR_SET_CHILD_SUBREAPER,
    PR_SET_NO_NEW_PRIVS,
    mount,
    prctl,
    umount_detached,
    unshare,
)

# Programs of the worker with (host) pid P run as uid/gid SANDBOX_ID_BASE + P: unique among live workers
# and far above the ids that real accounts or container sub-id ranges use.
SANDBOX_ID_BASE = 3_000_000_000

# Mount points (and everything below them) that stay as they are: kernel interfaces and devices.
_KEEP_WRITABLE = ("/proc", "/sys", "/dev")
# The worker's descriptor on /proc, opened before the new root is entered (which has a /proc only
# inside a PID namespace of our own): supervision.py finds the programs' processes through it.
proc_dir_fd: int | None = None


def _decode_mountinfo_path(raw: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as \ooo octal.
    out, i = [], 0
    while i < len(raw):
        if raw[i] == "\\" and i + 4 <= len(raw) and raw[i + 1 : i + 4].isdigit():
            out.append(chr(int(raw[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(raw[i])
            i += 1
    return "".join(out)


def sources_shown(mountinfo: str, bound: list[str]) -> list[str]:
    """The bound paths whose mountinfo line names another path of their source file system.

    mountinfo's fourth field is a bind mount's path inside its source file system; for a
    visible path that is on the host a bind mount of some other directory (a container volume)
    it is that other directory, which programs can read in their /proc/self/mountinfo.
    """
    found = []
    for line in mountinfo.splitlines():
        fields = line.split()
        if len(fields) < 5:
            continue
        root, point = _decode_mountinfo_path(fields[3]), _decode_mountinfo_path(fields[4])
        if point in bound and root != point:
            found.append(f"{point} (from {root})")
    return found


def _mounts() -> list[tuple[str, int]]:
    """(mount point, per-mount flags to keep) for every mount visible to this process."""
    keep = {
        "nosuid": MS_NOSUID,
        "nodev": MS_NODEV,
        "noexec": MS_NOEXEC,
        "noatime": MS_NOATIME,
        "nodiratime": MS_NODIRATIME,
        "relatime": MS_RELATIME,
        "strictatime": MS_STRICTATIME,
    }
    result = []
    with open("/proc/self/mountinfo", encoding="utf-8") as fh:
        for line in fh:
            fields = line.split()
            flags = 0
            for opt in fields[5].split(","):
                flags |= keep.get(opt, 0)
            result.append((_decode_mountinfo_path(fields[4]), flags))
    return result


def _under(path: str, roots: tuple[str, ...]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def _setup_user_namespace() -> None:
    """Enter a new user namespace mapping our own uid/gid to themselves (no root needed)."""
    uid, gid = os.getuid(), os.getgid()
    unshare(CLONE_NEWUSER)
    with open("/proc/self/setgroups", "w") as fh:
        fh.write("deny")
    with open("/proc/self/uid_map", "w") as fh:
        fh.write(f"{uid} {uid} 1")
    with open("/proc/self/gid_map", "w") as fh:
        fh.write(f"{gid} {gid} 1")


def _setup_mounts(hide_paths: list[str], tmpfs_mb: int, visible: list[str], with_proc: bool) -> dict[str, list[str]]:
    """Make `visible` (read-only), /dev nodes, a private /tmp (and /proc) the whole filesystem.

    Every mount is first re-mounted read-only in our namespace, so that the bind mounts made
    from them (and their sub-mounts) are read-only too; then rootfs.py builds the new root and
    pivots into it. Per-program directories are created in its private /tmp, which the worker
    empties after every program, so nothing a program writes can outlive it or reach the host.
    """
    mount(None, "/", None, MS_REC | MS_PRIVATE)  # never propagate our mounts to the host
    mounts = _mounts()
    for point, flags in mounts:
        if _under(point, _KEEP_WRITABLE):
            continue
        try:
            mount(None, point, None, MS_BIND | MS_REMOUNT | MS_RDONLY | flags)
        except OSError as exc:
            if exc.errno not in (errno.ENOENT, errno.EACCES, errno.EINVAL):
                raise
    by_depth = sorted(mounts, key=lambda m: len(m[0]), reverse=True)

    def flags_of(path: str) -> int:
        # A re-mount in a user namespace must keep the locked flags of the mount holding the path.
        return next((flags for point, flags in by_depth if rootfs.inside(path, point)), 0)

    try:
        return rootfs.enter_new_root(rootfs.plan(visible), tmpfs_mb, hide_paths, with_proc, flags_of)
    except OSError:
        try:
            umount_detached(rootfs.BUILD_AT)  # whatever half-built root is there
        except OSError:
            pass
        raise


def _probe_uid(uid: int, must_read: list[str]) -> bool:
    """Whether a child can switch to `uid` (fails in user namespaces without that id mapped) and
    then still read `must_read` (the standard library)."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            for path in must_read:
                if os.path.isdir(path):
                    os.listdir(path)
                else:
                    open(path, "rb").close()
            os._exit(0)
        except BaseException:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


def setup_worker(
    fallback_scratch: str,
    hide_paths: list[str],
    parent_pid: int,
    mode: str,
    tmpfs_mb: int,
    visible: list[str],
    pid_namespace: bool = True,
    new_root: bool = True,
) -> dict[str, Any]:
    """Apply process-wide isolation to the worker; return what is active.

    mode: "auto" (namespaces and a separate uid when root, else an unprivileged user namespace),
        "userns" (the unprivileged path even when root: for testing what non-root machines get),
        or "off" (in-process guards only).
    visible: the host paths programs may read (rootfs.visible_paths: the Python installation,
        system libraries, granted paths); with a mount namespace they become the whole filesystem.
    hide_paths: paths inside `visible` trees to cover anyway.
    pid_namespace: try to become pid 1 of a PID namespace of our own (False: for testing what
    machines without one get).
    new_root: build the allow-list root (False: for testing what machines without a mount
    namespace get, where the in-process guards enforce the allow-list).

    The report has keys: network ("netns" | "python-socket-block"), filesystem ("allowlist-root":
    a new root holding only `visible`, or "python-audit-hook": the guards check the same list),
    ipc ("per-program": a fresh IPC namespace for every program, or "host"), syscall_filter
    (bool: programs run under syscall_filter.py's seccomp filter),
    sandbox_uid (int or None), user_namespace (bool), pid_namespace (bool: the worker is pid 1 of
    its own PID namespace, see pidns.py), host_pid (the worker's pid outside that namespace),
    visible_paths, hidden_paths (lists), scratch (the directory per-program directories are made
    in: the private /tmp, or `fallback_scratch` without a mount namespace), notes.
    """
    global proc_dir_fd
    notes: list[str] = []
    # Orphans of a program re-parent to the worker (not to init), so the worker can always find
    # and reap every process a program left behind.
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    # No parent-death signal for the worker: Linux ties it to the *thread* that started us, and
    # the grader may start workers from short-lived threads. The worker exits instead when the
    # grader's end of the request pipe closes (at most one program's wall time later).
    if os.getppid() != parent_pid:  # the grader is already gone
        os._exit(1)
    # No program can gain privileges through a setuid binary.
    prctl(PR_SET_NO_NEW_PRIVS, 1)

    report: dict[str, Any] = {
        "network": "python-socket-block",
        "filesystem": "python-audit-hook",
        "ipc": "host",
        "syscall_filter": False,
        "sandbox_uid": None,
        "user_namespace": False,
        "pid_namespace": False,
        "host_pid": os.getpid(),
        "visible_paths": list(visible),
        "hidden_paths": [],
        "scratch": fallback_scratch,
        "notes": notes,
    }
    if mode == "off":
        notes.append("OS isolation disabled by configuration")
        return report
    # Needs no privileges (no_new_privs is set), so it applies in the fallback layers too.
    why_not = syscall_filter.probe()
    if why_not is None:
        report["syscall_filter"] = True
    else:
        notes.append(f"no seccomp filter ({why_not}): programs may use keyrings and make namespaces")

    is_root = os.geteuid() == 0 and mode != "userns"
    if not is_root:
        try:
            _setup_user_namespace()
            report["user_namespace"] = True
        except OSError as exc:
            notes.append(f"no user namespace ({exc.strerror}); using in-process guards only")
            return report
    why_not = pidns.probe() if pid_namespace else "disabled by configuration"
    if why_not is None:
        report["host_pid"] = pidns.enter()  # from here on we are pid 1 of a namespace of our own
        report["pid_namespace"] = True
    else:
        notes.append(f"no PID namespace: {why_not}; leftovers are found through the process tree")
    try:
        unshare(CLONE_NEWNET)
        report["network"] = "netns"
    except OSError as exc:
        notes.append(f"no network namespace ({exc.strerror})")
    try:
        # Programs read /proc/self/cgroup: with a namespace of our own it names no host cgroup.
        unshare(CLONE_NEWCGROUP)
    except OSError as exc:
        notes.append(f"no cgroup namespace ({exc.strerror}): /proc/self/cgroup shows the host's cgroup paths")
    try:
        # The worker's own, away from the host's; each program then makes a fresh one (child.py).
        unshare(CLONE_NEWIPC)
        report["ipc"] = "per-program"
    except OSError as exc:
        notes.append(f"no IPC namespace ({exc.strerror}): programs share the host's SysV IPC and POSIX message queues")
    # This PID namespace's /proc (or the host's), kept for the worker: the new root has none
    # without a PID namespace of our own.
    proc_dir_fd = os.open("/proc", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        if not new_root:
            raise OSError(errno.EPERM, "disabled by configuration")
        unshare(CLONE_NEWNS)
        mounts = _setup_mounts(hide_paths, tmpfs_mb, visible, with_proc=report["pid_namespace"])
        report["hidden_paths"], report["visible_paths"] = mounts["hidden"], mounts["bound"]
        report["filesystem"] = "allowlist-root"
        report["scratch"] = "/tmp"
        if report["pid_namespace"]:  # programs have a /proc only then
            with open(
                os.open("self/mountinfo", os.O_RDONLY | os.O_CLOEXEC, dir_fd=proc_dir_fd),
                encoding="utf-8",
                errors="replace",
            ) as fh:
                shown = sources_shown(fh.read(), mounts["bound"])
            if shown:
                notes.append(
                    "programs' /proc/self/mountinfo names the host directories these visible "
                    f"paths are bound from: {', '.join(shown)}"
                )
    except OSError as exc:
        notes.append(
            f"no private root filesystem ({exc.strerror or exc}); the in-process guards enforce the allow-list"
        )
    if is_root:
        uid = SANDBOX_ID_BASE + report["host_pid"]  # os.getpid() is 1 in every PID namespace
        if _probe_uid(uid, [os.path.dirname(os.__file__)]):
            report["sandbox_uid"] = uid
        else:
            notes.append(
                f"cannot switch to uid {uid} (or it cannot read the Python installation); "
                "programs keep the worker's uid"
            )
    return report
