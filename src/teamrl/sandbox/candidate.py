"""The candidate side of `run_tests`: load the program, then answer the judge's calls.

Runs in the confined, forked program process. The tests never enter this process: the judge
(another process) sends only "call this function with these plain arguments" requests and
receives plain values back (see values.py). Everything here is under the program's control
once its code has run, and that is fine: all the program can influence is the values it returns.
"""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Callable
from typing import Any

from . import child, protocol, values

MAX_REPLY_BYTES = 16 * 1024 * 1024
MODULE_NAME = "solution"  # not "__main__": `if __name__ == "__main__":` demo code must not run


# One-argument questions the judge may ask about an object of the program. Each answer is plain
# data the program could as well have returned directly, so they give it no extra power.
_UNARY: dict[str, Callable[[Any], Any]] = {"bool": bool, "len": len, "str": str}


def _describe(namespace: dict[str, Any]) -> dict[str, str]:
    """Public top-level names of the program and what they are ("callable", "module:<name>", "value")."""
    kinds = {}
    for name, obj in namespace.items():
        if name.startswith("__"):
            continue
        if isinstance(obj, types.ModuleType):
            kinds[name] = f"module:{obj.__name__}"
        elif callable(obj):
            kinds[name] = "callable"
        else:
            kinds[name] = "value"
    return kinds


def _load(source: str, namespace: dict[str, Any]) -> str | None:
    """Run the program's top level; return why it failed, or None."""
    try:
        exec(compile(source, child.PROGRAM_FILENAME, "exec", dont_inherit=True), namespace)  # noqa: S102
        return None
    except SystemExit as exc:
        return f"the program called exit({exc.code!r}) before the tests ran"
    except BaseException as exc:  # noqa: BLE001
        child._print_exception(exc)
        return f"the program raised {type(exc).__name__} while loading: {str(exc)[:300]}"


class _Server:
    """Answers call / getattr / setattr / iter / unary / getname requests against the program's namespace."""

    def __init__(self, namespace: dict[str, Any]):
        self.namespace = namespace
        self.refs: dict[int, Any] = {}

    def to_ref(self, obj: Any) -> dict[str, Any]:
        ref = len(self.refs) + 1
        self.refs[ref] = obj
        return {"$": values.TAG_REF, "v": ref, "type": type(obj).__name__}

    def from_ref(self, data: dict[str, Any]) -> Any:
        if data["$"] == values.TAG_NAME:
            return self.namespace[data["v"]]
        return self.refs[data["v"]]

    def handle(self, msg: dict[str, Any]) -> Any:
        op = msg["op"]
        if op == "getname":
            return self.namespace[msg["name"]]
        target = values.decode(msg["target"], self.from_ref)
        if op == "call":
            args = values.decode(msg["args"], self.from_ref)
            kwargs = values.decode(msg["kwargs"], self.from_ref)
            return target(*args, **kwargs)
        if op == "getattr":
            return getattr(target, msg["name"])
        if op == "setattr":
            setattr(target, msg["name"], values.decode(msg["value"], self.from_ref))
            return None
        if op == "iter":
            return list(target)
        if op == "unary":
            return _UNARY[msg["name"]](target)
        raise ValueError(f"unknown op {op!r}")

    def reply(self, msg: dict[str, Any]) -> dict[str, Any]:
        try:
            result = self.handle(msg)
            return {"value": values.encode(result, self.to_ref, convert=True)}
        except BaseException as exc:  # noqa: BLE001 - a failing call is an answer, not a crash
            try:
                text = str(exc)[:1000]
            except BaseException:  # noqa: BLE001 - a hostile __str__
                text = ""
            return {"raised": type(exc).__name__, "message": text}


def run_candidate(
    source: str,
    fd_map: dict[int, int],
    workdir: str,
    limits: dict[str, Any],
    how: child.Confinement,
    guard_config: dict[str, Any] | None,
    rpc_in: int,
    rpc_out: int,
) -> None:
    """Entry point in the forked candidate process. Never returns.

    fd_map must map rpc_in and rpc_out to themselves so that `confine` keeps them open.
    """
    try:
        child.confine(fd_map, workdir, limits, how)
        namespace = child.prepare_interpreter(workdir, guard_config, source)
        namespace["__name__"] = MODULE_NAME
        sys.modules[MODULE_NAME] = sys.modules["__main__"]
    except BaseException as exc:  # noqa: BLE001
        os.write(2, f"teamrl-sandbox: could not confine the program: {exc!r}\n".encode())
        os._exit(child.SETUP_FAILED_EXIT)
    failure = _load(source, namespace)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:  # noqa: BLE001
            pass
    try:
        if failure is not None:
            protocol.send_message(rpc_out, {"load_error": failure})
            os._exit(1)
        server = _Server(namespace)
        protocol.send_message(rpc_out, {"ready": True, "names": _describe(namespace)})
        while True:
            msg = protocol.recv_message(rpc_in)
            reply = server.reply(msg)
            try:
                encoded = protocol.encode_message(reply)
            except (ValueError, protocol.ProtocolError) as exc:  # e.g. an int too long for JSON
                encoded = protocol.encode_message({"raised": "ValueError", "message": f"unsendable result: {exc}"})
            if len(encoded) > MAX_REPLY_BYTES:
                encoded = protocol.encode_message({"raised": "ValueError", "message": "result too large"})
            for stream in (sys.stdout, sys.stderr):
                stream.flush()
            protocol.write_all(rpc_out, encoded)
    except BaseException:  # noqa: BLE001 - the judge hung up (done) or the channel broke
        pass
    child.finish(0)
