"""The judge side of `run_tests`: runs the ground-truth tests in a process of its own.

The judge executes the tests (trusted code) in a namespace where the program's functions are
*proxies*: calling one sends the plain-data arguments to the candidate process and decodes the
plain-data result (values.py). So the verdict is computed here, from builtin values, by code the
program cannot reach: the program never sees the tests, cannot patch `assert`, builtins or the
reporting, and an early exit only makes the remaining calls fail.

Test units: each top-level statement that contains an `assert` (of the `check` function for
HumanEval-style tests, of the module for MBPP-style assert lists) is one unit, wrapped in
try/except so that one failing unit does not stop the others. The judge streams one message per
unit to the worker, so units finished before a timeout still count.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import sys
from typing import Any

from . import protocol, values

RECORD_NAME = "__teamrl_record__"
_MAX_CANDIDATE_MESSAGE = 32 * 1024 * 1024


class CandidateError(Exception):
    """The program raised an exception that is not a builtin one (or tried to exit)."""


class CandidateGone(Exception):
    """The program process stopped answering (it exited, crashed, or was killed)."""


class UntrustedValue(TypeError):
    """A test used a non-data object from the program in a way that would trust its behaviour."""


# ----------------------------------------------------------------------------- test plan


def _contains_assert(node: ast.AST) -> bool:
    todo = [node]
    while todo:
        current = todo.pop()
        if isinstance(current, ast.Assert):
            return True
        for kid in ast.iter_child_nodes(current):
            if not isinstance(kid, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                todo.append(kid)
    return False


def _recorded(stmts: list[ast.stmt], index: int | None) -> ast.Try:
    """try/<stmts>/except: record(index, exc)/else: record(index, None); index None: failures are ignored."""
    call = lambda arg: ast.Expr(
        ast.Call(
            ast.Name(RECORD_NAME, ast.Load()),  # noqa: E731
            [ast.Constant(index), arg],
            [],
        )
    )
    handler: list[ast.stmt]
    orelse: list[ast.stmt]
    if index is None:
        handler, orelse = [ast.Pass()], []
    else:
        handler, orelse = [call(ast.Name("__teamrl_exc__", ast.Load()))], [call(ast.Constant(None))]
    wrapped = ast.Try(
        body=stmts,
        handlers=[ast.ExceptHandler(ast.Name("BaseException", ast.Load()), "__teamrl_exc__", handler)],
        orelse=orelse,
        finalbody=[],
    )
    return ast.copy_location(wrapped, stmts[0])


def _wrap_units(body: list[ast.stmt], source: str, units: list[str]) -> list[ast.stmt]:
    """Replace each assert-containing statement by a recorded one (see `_recorded`)."""
    new_body: list[ast.stmt] = []
    for stmt in body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) or not _contains_assert(stmt):
            new_body.append(stmt)
            continue
        units.append(ast.get_source_segment(source, stmt) or ast.unparse(stmt))
        new_body.append(_recorded([stmt], len(units) - 1))
    return new_body


def plan_steps(steps: Any) -> tuple[Any, list[str]]:
    """Compile model-written tests given as [source, is_unit] steps: (code object, unit sources).

    Each step runs in order in one namespace; a unit step records its verdict, and a failing
    helper step (an import, a definition) does not stop the steps after it.
    Raises ValueError with a clear message for unusable steps.
    """
    if not isinstance(steps, list) or not all(
        isinstance(step, list) and len(step) == 2 and isinstance(step[0], str) and isinstance(step[1], bool)
        for step in steps
    ):
        raise ValueError("steps must be a list of [statement source, is a unit] pairs")
    body: list[ast.stmt] = []
    units: list[str] = []
    for source, counted in steps:
        try:
            stmts = ast.parse(source, "<tests>").body
        except SyntaxError as exc:
            raise ValueError(f"a test step does not parse: {exc}") from None
        if not stmts:
            continue
        if counted:
            units.append(source)
        body.append(_recorded(stmts, len(units) - 1 if counted else None))
    if not units:
        raise ValueError("no unit steps in the tests")
    tree = ast.fix_missing_locations(ast.Module(body=body, type_ignores=[]))
    return compile(tree, "<tests>", "exec", dont_inherit=True), units


def plan_tests(tests: str, entry_point: str | None) -> tuple[Any, list[str], bool]:
    """Compile the instrumented tests: (code object, unit sources, calls_check).

    calls_check: the tests define `check(candidate)` (HumanEval style), which the judge calls
    with the entry point; otherwise the module's own top-level asserts are the units.
    Raises ValueError with a clear message for unusable tests.
    """
    try:
        tree = ast.parse(tests, "<tests>")
    except SyntaxError as exc:
        raise ValueError(f"the tests do not parse: {exc}") from None
    units: list[str] = []
    check = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "check"), None)
    if check is not None:
        if not entry_point:
            raise ValueError("the tests define check(candidate) but no entry_point was given")
        check.body = _wrap_units(check.body, tests, units)
    else:
        tree.body = _wrap_units(tree.body, tests, units)
    if not units:
        raise ValueError("no assert statements found in the tests")
    ast.fix_missing_locations(tree)
    return compile(tree, "<tests>", "exec", dont_inherit=True), units, check is not None


# ----------------------------------------------------------------------------- proxies


class Client:
    """The judge's connection to the candidate process."""

    def __init__(self, req_fd: int, resp_fd: int):
        self.req_fd, self.resp_fd = req_fd, resp_fd
        self.gone: str | None = None

    def hello(self) -> dict[str, Any]:
        try:
            return protocol.recv_message(self.resp_fd, max_bytes=_MAX_CANDIDATE_MESSAGE)
        except (protocol.ProtocolError, OSError):
            self.gone = "the program exited before the tests ran"
            return {"load_error": self.gone}

    def request(self, msg: dict[str, Any]) -> Any:
        if self.gone:
            raise CandidateGone(self.gone)
        try:
            protocol.send_message(self.req_fd, msg)
            reply = protocol.recv_message(self.resp_fd, max_bytes=_MAX_CANDIDATE_MESSAGE)
            raised = reply.get("raised") if isinstance(reply, dict) else None
            value = None if raised is not None else values.decode(reply["value"], self.remote)
        except (protocol.ProtocolError, OSError, KeyError, TypeError, ValueError) as exc:
            # A broken channel or a malformed answer: either way the program is out of the game.
            self.gone = f"the program stopped answering ({type(exc).__name__}: {exc})"
            raise CandidateGone(self.gone) from None
        if raised is not None:
            raise _rebuild_exception(str(raised), str(reply.get("message", "")))
        return value

    def remote(self, data: dict[str, Any]) -> Any:
        if data["$"] == values.TAG_NAME:
            return RemoteFunction(self, str(data["v"]))
        return RemoteObject(self, data)

    def call(self, target: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        try:
            encoded = {
                "op": "call",
                "target": values.encode(target, _ref_of),
                "args": values.encode(list(args), _ref_of),
                "kwargs": values.encode(dict(kwargs), _ref_of),
            }
        except values.ValueCodecError as exc:
            raise TypeError(str(exc)) from None
        return self.request(encoded)


def _rebuild_exception(name: str, message: str) -> BaseException:
    """A builtin exception of the same type (so tests expecting e.g. ValueError work), else CandidateError."""
    exc: BaseException = CandidateError(f"{name}: {message}")
    cls = getattr(builtins, name, None)
    if isinstance(cls, type) and issubclass(cls, Exception) and cls.__module__ == "builtins":
        try:
            exc = cls(message)
        except Exception:  # noqa: BLE001 - e.g. UnicodeDecodeError needs 5 arguments
            pass
    exc.teamrl_from_program = True  # type: ignore[attr-defined]
    return exc


def _ref_of(obj: Any) -> dict[str, Any]:
    if isinstance(obj, RemoteFunction):
        return {"$": values.TAG_NAME, "v": obj.__name__}
    if isinstance(obj, RemoteObject):
        return {"$": values.TAG_REF, "v": obj._ref}
    raise values.ValueCodecError(f"cannot send a {type(obj).__name__} to the program (only plain data)")


class RemoteFunction:
    """A top-level callable of the program (function or class), called over the channel."""

    def __init__(self, client: Client, name: str):
        self._client = client
        self.__name__ = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._client.call(self, args, kwargs)

    def __repr__(self) -> str:
        return f"<program function {self.__name__}>"


class RemoteObject:
    """A non-data object living in the program (a tree node, a regex match, a generator, ...).

    It can be passed back to the program, called, iterated, have attributes read or set, and be
    asked for its truth value, length or str: each answer is plain data the program could have
    returned anyway. Comparisons are refused: answering `obj == expected` would both trust the
    program's `__eq__` and hand it the expected value.
    """

    def __init__(self, client: Client, data: dict[str, Any]):
        object.__setattr__(self, "_client", client)
        object.__setattr__(self, "_ref", data["v"])
        object.__setattr__(self, "_type", str(data.get("type", "object")))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._client.call(self, args, kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return self._client.request({"op": "getattr", "target": _ref_of(self), "name": name})

    def __setattr__(self, name: str, value: Any) -> None:
        try:
            encoded = values.encode(value, _ref_of)
        except values.ValueCodecError as exc:
            raise TypeError(str(exc)) from None
        self._client.request({"op": "setattr", "target": _ref_of(self), "name": name, "value": encoded})

    def __iter__(self) -> Any:
        return iter(self._client.request({"op": "iter", "target": _ref_of(self)}))

    def _unary(self, name: str, expected: type) -> Any:
        answer = self._client.request({"op": "unary", "target": _ref_of(self), "name": name})
        if type(answer) is not expected:
            raise UntrustedValue(f"{name}() of a program object gave a {type(answer).__name__}")
        return answer

    def __bool__(self) -> bool:
        return self._unary("bool", bool)

    def __len__(self) -> int:
        return self._unary("len", int)

    def __str__(self) -> str:
        return self._unary("str", str)

    def _untrusted(self, *_: Any) -> Any:
        raise UntrustedValue(
            f"the program returned a {self._type} object, not plain data; comparing it would trust its own __eq__"
        )

    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __contains__ = _untrusted
    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return f"<program {self._type} object>"


class _Namespace(dict):
    """Test globals: names the tests do not define resolve to the program's top-level names.

    Builtins are never taken from the program (it could redefine `abs` or `len` to fool a test),
    and modules the program imported are imported here for real (standard library only).
    """

    def __init__(self, client: Client, names: dict[str, str]):
        super().__init__()
        self._client, self._names = client, names

    def __missing__(self, name: str) -> Any:
        kind = self._names.get(name)
        if kind is None or name in builtins.__dict__:
            raise KeyError(name)
        if name in sys.stdlib_module_names:
            # Tests that say `math.isclose(...)` mean the real module, whatever the program bound
            # to that name (a fake object with an always-true `isclose` would decide the verdict).
            value: Any = importlib.import_module(name)
        elif kind == "callable":
            value = RemoteFunction(self._client, name)
        elif kind.startswith("module:"):
            module = kind.split(":", 1)[1]
            if module.split(".")[0] not in sys.stdlib_module_names:
                raise KeyError(name)
            value = importlib.import_module(module)
        else:  # a module-level value of the program (e.g. a constant the tests refer to)
            value = self._client.request({"op": "getname", "name": name})
        self[name] = value
        return value


# ----------------------------------------------------------------------------- main


def run_judge(
    tests: str, setup: str, entry_point: str | None, req_fd: int, resp_fd: int, result_fd: int, steps: Any = None
) -> int:
    """Run the tests against the candidate; stream results to `result_fd`; return an exit code.

    steps: model-written tests as [source, is_unit] pairs (see `plan_steps`), used instead of
    `tests` when given.
    """

    def report(msg: dict[str, Any]) -> None:
        protocol.send_message(result_fd, msg)

    try:
        if steps is not None:
            (code, units), calls_check = plan_steps(steps), False
        else:
            code, units, calls_check = plan_tests(tests, entry_point)
    except ValueError as exc:
        report({"units": [], "done": True, "status": "error", "error": str(exc)})
        return 0
    report({"units": units})
    client = Client(req_fd, resp_fd)
    hello = client.hello()
    if "load_error" in hello or not isinstance(hello.get("names"), dict):
        report(
            {
                "done": True,
                "status": "error",
                "error": str(hello.get("load_error", "bad hello"))[:2000],
                "program_loaded": False,
            }
        )
        return 0
    names = {str(k): str(v) for k, v in hello["names"].items()}
    namespace = _Namespace(client, names)
    namespace.update({"__builtins__": builtins, "__name__": "__tests__"})
    recorded: set[int] = set()

    def record(index: int, exc: BaseException | None) -> None:
        recorded.add(index)
        error = "" if exc is None else (f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)[:500]
        report({"unit": index, "passed": exc is None, "error": error})

    try:
        if setup:
            exec(compile(setup, "<test setup>", "exec", dont_inherit=True), namespace)  # noqa: S102
        if entry_point:
            namespace[entry_point] = RemoteFunction(client, entry_point)
        namespace[RECORD_NAME] = record
        exec(code, namespace)  # noqa: S102 - the ground-truth tests: trusted
        if calls_check:
            namespace["check"](namespace[entry_point])
        report({"done": True, "status": "ok", "error": "", "candidate_gone": client.gone is not None})
    except BaseException as exc:  # noqa: BLE001 - a statement outside the units failed
        message = f"tests stopped early: {type(exc).__name__}: {exc}"[:2000]
        for index in range(len(units)):
            if index not in recorded:
                report({"unit": index, "passed": False, "error": "not run: " + message[:300]})
        gone = isinstance(exc, CandidateGone) or getattr(exc, "teamrl_from_program", False) or client.gone is not None
        report(
            {
                "done": True,
                "status": "ok" if gone or recorded else "error",
                "error": message,
                "candidate_gone": client.gone is not None,
            }
        )
    return 0
