"""Program snippets that keep a counter in a kernel-global store (for tests/sandbox/test_kernel_state.py).

Each store's snippet defines `bump()`: add one to a counter kept under a name of the test's
choosing in that store, and return the new value (1 when the store held nothing under that name).
A program that sees 2 on its second run read state an earlier run left behind. All but
`posix_shm` need ctypes (allowed only where programs run under a user id of their own and in the
new root); `posix_shm` uses what the standard library offers, and so works in every layer.
"""

from __future__ import annotations

import platform
import textwrap

# add_key and keyctl have no glibc wrapper (they live in libkeyutils).
_KEY_SYSCALLS = {"x86_64": (248, 250), "aarch64": (217, 219)}

_PRELUDE = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
def check(ret, what):
    if ret == -1:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return ret
"""

_SNIPPETS = {
    "sysv_shm": """
        libc.shmat.restype = ctypes.c_void_p
        def bump():
            seg = check(libc.shmget(KEY, 4096, 0o1666), "shmget")  # IPC_CREAT | 0666
            addr = libc.shmat(seg, None, 0)
            if addr in (None, ctypes.c_void_p(-1).value):
                raise OSError(ctypes.get_errno(), "shmat")
            cell = ctypes.c_int.from_address(addr)
            cell.value += 1
            return cell.value
    """,
    "sysv_sem": """
        class SemBuf(ctypes.Structure):
            _fields_ = [("num", ctypes.c_ushort), ("op", ctypes.c_short), ("flg", ctypes.c_short)]
        def bump():
            sem = check(libc.semget(KEY, 1, 0o1666), "semget")
            check(libc.semop(sem, ctypes.byref(SemBuf(0, 1, 0)), 1), "semop")
            return check(libc.semctl(sem, 0, 12), "semctl")  # GETVAL
    """,
    "sysv_msg": """
        class Msg(ctypes.Structure):
            _fields_ = [("mtype", ctypes.c_long), ("text", ctypes.c_char * 32)]
        def bump():
            queue = check(libc.msgget(KEY, 0o1666), "msgget")
            msg = Msg()
            got = libc.msgrcv(queue, ctypes.byref(msg), 32, 0, 0o4000)  # IPC_NOWAIT
            count = int(msg.text.decode()) + 1 if got > 0 else 1
            msg = Msg(1, str(count).encode())
            check(libc.msgsnd(queue, ctypes.byref(msg), 32, 0o4000), "msgsnd")
            return count
    """,
    "mqueue": """
        def bump():
            flags = os.O_CREAT | os.O_RDWR | os.O_NONBLOCK
            queue = check(libc.mq_open(("/" + NAME).encode(), flags, 0o666, None), "mq_open")
            buf = ctypes.create_string_buffer(1 << 16)
            got = libc.mq_receive(queue, buf, len(buf), None)
            count = int(buf.value.decode()) + 1 if got > 0 else 1
            text = str(count).encode()
            check(libc.mq_send(queue, text, len(text), 0), "mq_send")
            return count
    """,
    "keyring": """
        ADD_KEY, KEYCTL = SYSCALLS
        libc.syscall.restype = ctypes.c_long
        def bump():
            # KEY_SPEC_USER_KEYRING: the keyring of the program's user id, which outlives the run.
            key = libc.syscall(KEYCTL, 10, -4, b"user", NAME.encode(), 0)  # KEYCTL_SEARCH
            count = 1
            if key > 0:
                buf = ctypes.create_string_buffer(32)
                size = check(libc.syscall(KEYCTL, 11, key, buf, 32), "keyctl read")  # KEYCTL_READ
                count = int(buf.raw[:size].decode()) + 1
            text = str(count).encode()
            check(libc.syscall(ADD_KEY, b"user", NAME.encode(), text, len(text), -4), "add_key")
            return count
    """,
    "posix_shm": """
        import mmap, _posixshmem
        def bump():
            fd = _posixshmem.shm_open("/" + NAME, os.O_CREAT | os.O_RDWR, 0o666)
            os.ftruncate(fd, 8)
            with mmap.mmap(fd, 8) as cell:
                count = int.from_bytes(cell[:8], "little") + 1
                cell[:8] = count.to_bytes(8, "little")
            os.close(fd)
            return count
    """,
}

STORES = tuple(_SNIPPETS)


def counter_source(store: str, key: int, name: str) -> str:
    """Source defining `bump()` for `store`; `key` names SysV objects, `name` the others."""
    if store not in _SNIPPETS:
        raise ValueError(f"unknown store {store!r}; expected one of {STORES}")
    syscalls = _KEY_SYSCALLS.get(platform.machine(), (-1, -1))
    header = f"KEY = {key}\nNAME = {name!r}\nSYSCALLS = {syscalls!r}\n"
    prelude = "import os\n" if store == "posix_shm" else _PRELUDE  # ctypes is refused in some layers
    return header + prelude + textwrap.dedent(_SNIPPETS[store])
