"""Runtime loops: ``for i in sl.range(start, stop, step):`` in a kernel.

The kernel function is recompiled from its source with each such loop
rewritten into a nested body function and a call of :func:`run_range_loop`::

    for j in sl.range(lo, hi, step):          def __sage_loop_1(j, acc, m):
        body                          ->          body
                                                  return (acc, m)
                                              (acc, m) = __sage_run(sl.range(lo, hi, step),
                                                                    __sage_loop_1, (acc, m))

The loop-carried names (``acc, m``) are the names assigned in the loop that
exist before it (parameters, or assigned earlier in the function). A name
first assigned inside the loop and read after it is an error: it has no
value when the loop runs zero times. Both backends run the same rewritten
function: the IR builder traces the body once into ``scf.for``; the
interpreter calls it once per iteration.
"""

from __future__ import annotations

import ast
import builtins
import gc
import inspect
import textwrap
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from sage.language.core import int32, int64
from sage.language.diagnostics import Location, error
from sage.language.elementwise import cast, constant, to_value
from sage.language.values import Value, backend

_RUN = "__sage_run"
# Nodes with their own scope: their assignments are not the kernel's.
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.ListComp,
           ast.SetComp, ast.DictComp, ast.GeneratorExp)
_CACHE: "weakref.WeakKeyDictionary[Callable, Callable]" = weakref.WeakKeyDictionary()
# The stages of a loop that gives none: the launch's ``num_stages`` while
# sl.trace runs a kernel (launch_num_stages), else 1 (the interpreter).
_LAUNCH_NUM_STAGES: ContextVar[int] = ContextVar("sage_launch_num_stages", default=1)


def is_num_stages(value: object) -> bool:
    """Whether ``value`` is a valid ``num_stages``: an int >= 1, not a bool."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


@contextmanager
def launch_num_stages(num_stages: int) -> Iterator[None]:
    """Within: ``sl.range`` loops that pass no ``num_stages`` take this one
    (a launch's default, set by ``sl.trace``)."""
    token = _LAUNCH_NUM_STAGES.set(num_stages)
    try:
        yield
    finally:
        _LAUNCH_NUM_STAGES.reset(token)


@dataclass(frozen=True)
class RangeSpec:
    """The bounds of an ``sl.range`` loop (integers, runtime or constant) and
    its schedule (``num_stages``; None: the launch's, resolved when the loop
    is traced; ``warp_specialize``, ``ping_pong``)."""

    start: Any
    stop: Any
    step: Any
    num_stages: int | None = None
    warp_specialize: bool = False
    ping_pong: bool = False

    def __iter__(self):
        raise error("sl.range loops must be written directly in a kernel function whose "
                    "source file Python can read (helpers called from the kernel are plain "
                    "Python: use range() there for compile-time loops)")


def range(start: Any, stop: Any = None, step: Any = 1, *,  # noqa: A001
          num_stages: int | None = None, warp_specialize: bool = False,
          ping_pong: bool = False) -> RangeSpec:
    """A loop with runtime bounds, ``for i in sl.range(start, stop, step)`` (``scf.for``).

    Like Python's ``range``: one argument is ``stop``. ``step`` must be
    positive. The induction variable is i32, or i64 when a bound is i64.
    ``num_stages`` (a Python int, at least 1) is how many iterations' copies
    the loop keeps in flight: with S > 1 the tiles the body copies into
    shared memory by TMA for its matmuls are copied S - 1 iterations ahead,
    into S buffers (``sage.num_stages`` on the ``scf.for``,
    ``sagegpu-pipeline``). It changes when copies happen, never results:
    the interpreter ignores it. Not given, the loop takes the launch's
    ``num_stages`` (``kernel[grid](..., num_stages=S)``, ``sl.trace(...,
    num_stages=S)``; default 1); given, it wins (1 keeps the loop unpipelined).

    ``warp_specialize=True`` gives those copies a warpgroup of their own (a
    producer, launched beside the kernel's ``num_warps``, which must be whole
    warpgroups): it issues them into the S buffers as soon as the consumers
    (the kernel's warps, which run everything else) have freed one, and the
    registers it does not need go to the consumers (``sage.warp_specialize``
    on the ``scf.for``, ``sagegpu-warp-specialize``). It needs
    ``num_stages`` >= 2, a loop in the kernel body or in ``sl.range`` loops
    there (several marked loops must follow one another in one block: they
    share the producer) and only TMA copies that can be issued ahead.

    ``ping_pong=True`` (with ``warp_specialize``) makes the consumer
    warpgroups take turns at the tensor cores, as FA3 does: each waits for
    its turn before the first matmul of an iteration and passes it on after
    issuing the last (named barriers, ``sage.ping_pong``), so one
    warpgroup's softmax runs under the other's matmuls. It needs at least
    two consumer warpgroups. Like ``num_stages``, neither changes results.
    """
    if num_stages is not None and not is_num_stages(num_stages):
        raise error(f"sl.range num_stages must be an integer >= 1, got {num_stages!r}")
    if not isinstance(warp_specialize, bool):
        raise error(f"sl.range warp_specialize must be True or False, got {warp_specialize!r}")
    if not isinstance(ping_pong, bool):
        raise error(f"sl.range ping_pong must be True or False, got {ping_pong!r}")
    if ping_pong and not warp_specialize:
        raise error("sl.range ping_pong=True needs warp_specialize=True (the consumer "
                    "warpgroups take turns in a warp-specialised loop)")
    if stop is None:
        start, stop = 0, start
    return RangeSpec(start, stop, step, num_stages, warp_specialize, ping_pong)


def _loop_bound(x: Any, what: str, dtype) -> Value:
    if isinstance(x, Value) and (x.is_tile or x.is_pointer or not x.dtype.is_int):
        raise error(f"sl.range {what} must be an integer scalar, got {x.type.mlir}")
    if isinstance(x, (float, bool)) or not isinstance(x, (int, Value)):
        raise error(f"sl.range {what} must be an integer, got {x!r}")
    return cast(to_value(x, dtype), dtype)


def run_range_loop(spec: Any, body: Callable[..., tuple], names: Sequence[str],
                   inits: Sequence[Any]) -> tuple:
    """Runs one rewritten ``sl.range`` loop on the active backend."""
    if not isinstance(spec, RangeSpec):
        raise error("internal: a rewritten loop needs sl.range(...)")
    if isinstance(spec.step, int) and not isinstance(spec.step, bool) and spec.step <= 0:
        raise error(f"sl.range step must be positive, got {spec.step}")
    bounds = (spec.start, spec.stop, spec.step)
    wide = any(isinstance(b, Value) and not b.is_tile and b.dtype is int64 for b in bounds)
    dtype = int64 if wide else int32
    start, stop, step = (_loop_bound(b, w, dtype) for b, w in zip(bounds, ("start", "stop", "step")))
    carried = []
    for name, value in zip(names, inits):
        if isinstance(value, Value) or (isinstance(value, (int, float)) and not isinstance(value, bool)):
            carried.append(to_value(value))
        else:
            raise error(f"'{name}' is assigned in an sl.range loop, so it is carried "
                        f"from one iteration to the next, but it holds "
                        f"{type(value).__name__}; only runtime values and numbers can be")

    def one_iteration(iv: Any, handles: Sequence[Any]) -> list[Value]:
        args = [Value(v.type, h) for v, h in zip(carried, handles)]
        out = body(Value(dtype, iv), *args)
        return [_carry(name, before, after)
                for name, before, after in zip(names, carried, out)]

    stages = _LAUNCH_NUM_STAGES.get() if spec.num_stages is None else spec.num_stages
    if spec.warp_specialize and stages < 2:
        raise error(f"sl.range warp_specialize=True needs num_stages >= 2 (the buffers the "
                    f"producer fills ahead), got {stages}")
    handles = backend().for_loop(start, stop, step, carried, one_iteration,
                                 num_stages=stages, warp_specialize=spec.warp_specialize,
                                 ping_pong=spec.ping_pong)
    return tuple(Value(v.type, h) for v, h in zip(carried, handles))


def _carry(name: str, before: Value, after: Any) -> Value:
    """The value of a carried name at the end of the body, in its type before the loop."""
    if not isinstance(after, Value):
        if isinstance(after, (int, float)) and not isinstance(after, bool) and not before.is_pointer:
            return constant(after, before.type)
        raise error(f"'{name}' is carried by an sl.range loop but holds "
                    f"{type(after).__name__} at the end of its body")
    if after.type != before.type:
        raise error(f"loop-carried '{name}' is {before.type.mlir} before the loop but "
                    f"{after.type.mlir} at the end of its body; convert it (e.g. with .to())")
    return after


# -- the AST rewrite --------------------------------------------------------------


def _stored_names(nodes: Sequence[ast.AST]) -> list[tuple[str, ast.AST]]:
    """Names assigned by ``nodes`` (not inside nested functions), with their nodes."""
    found = []
    stack = list(nodes)
    while stack:
        node = stack.pop()
        if isinstance(node, _SCOPES):
            if hasattr(node, "name"):
                found.append((node.name, node))
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            found.append((node.id, node))
        stack.extend(ast.iter_child_nodes(node))
    return found


def _position(node: ast.AST) -> tuple[int, int]:
    return (node.lineno, node.col_offset)


def _end(node: ast.AST) -> tuple[int, int]:
    return (node.end_lineno, node.end_col_offset)


class _Rewriter(ast.NodeTransformer):
    """Rewrites every ``for ... in sl.range(...)`` loop of one kernel function."""

    def __init__(self, function: ast.FunctionDef, is_range: Callable[[ast.expr], bool],
                 filename: str):
        self.function = function
        self.is_range = is_range
        self.filename = filename
        self.count = 0
        # visit_FunctionDef sets the scope, the kernel function's first.
        self.params: set[str] = set()
        self.stores: list[tuple[str, ast.AST]] = []
        self.loads: list[ast.Name] = []

    def _scope(self, function: ast.FunctionDef) -> None:
        """Loops see the names of their innermost enclosing function: its
        parameters, what it assigns and what it reads."""
        args = function.args
        self.params = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
        self.params |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
        self.stores = _stored_names(function.body)
        self.loads = [n for n in ast.walk(function) if isinstance(n, ast.Name)
                      and isinstance(n.ctx, ast.Load)]

    def visit_FunctionDef(self, function: ast.FunctionDef) -> Any:
        """The kernel function, or a helper nested in it that holds loops of
        its own (a persistent kernel's body per tile): its loops carry its
        names."""
        outer = (self.params, self.stores, self.loads)
        self._scope(function)
        self.generic_visit(function)
        self.params, self.stores, self.loads = outer
        return function

    def _fail(self, node: ast.AST, message: str):
        return error(message, Location(self.filename, node.lineno, node.col_offset + 1))

    def _check_body(self, loop: ast.For) -> None:
        if loop.orelse:
            raise self._fail(loop.orelse[0], "an sl.range loop cannot have an else clause")
        if not isinstance(loop.target, ast.Name):
            raise self._fail(loop.target, "an sl.range loop variable must be a single name")
        stack = [(node, False) for node in loop.body]  # (node, inside a Python loop)
        while stack:
            node, in_python_loop = stack.pop()
            if isinstance(node, _SCOPES):
                continue
            exits = (ast.Return, ast.Yield, ast.YieldFrom, ast.Global, ast.Nonlocal)
            if isinstance(node, exits) or (isinstance(node, (ast.Break, ast.Continue))
                                           and not in_python_loop):
                word = type(node).__name__.lower()
                raise self._fail(node, f"'{word}' is not allowed in an sl.range loop body")
            plain = isinstance(node, ast.While) or (isinstance(node, ast.For)
                                                    and not self.is_range(node.iter))
            stack.extend((child, in_python_loop or plain) for child in ast.iter_child_nodes(node))

    def _carried(self, loop: ast.For) -> list[str]:
        start, end = _position(loop), _end(loop)
        inside = {name for name, node in _stored_names([loop])}
        before = self.params | {name for name, node in self.stores
                                if _position(node) < start}
        for node in self.loads:
            if (node.id in inside and node.id not in before
                    and _position(node) >= end):
                raise self._fail(node, f"'{node.id}' is first assigned inside the sl.range "
                                       f"loop at line {loop.lineno} and used after it; assign "
                                       "it before the loop so that it is loop-carried")
        return sorted((inside - {loop.target.id}) & before)

    def visit_For(self, loop: ast.For) -> Any:
        if not self.is_range(loop.iter):
            self.generic_visit(loop)
            return loop
        self._check_body(loop)
        carried = self._carried(loop)
        self.generic_visit(loop)  # inner loops first
        self.count += 1
        name = f"__sage_loop_{self.count}"
        state = ast.Tuple([ast.Name(n, ast.Load()) for n in carried], ast.Load())
        body = ast.FunctionDef(
            name=name,
            args=ast.arguments(posonlyargs=[], args=[ast.arg(loop.target.id)] +
                               [ast.arg(n) for n in carried], kwonlyargs=[],
                               kw_defaults=[], defaults=[]),
            body=loop.body + [ast.Return(state)], decorator_list=[], returns=None,
            type_params=[])
        call = ast.Call(ast.Name(_RUN, ast.Load()),
                        [loop.iter, ast.Name(name, ast.Load()),
                         ast.Tuple([ast.Constant(n) for n in carried], ast.Load()), state], [])
        run = (ast.Assign([ast.Tuple([ast.Name(n, ast.Store()) for n in carried], ast.Store())],
                          call) if carried else ast.Expr(call))
        for node in (body, run):
            ast.copy_location(node, loop)
            ast.fix_missing_locations(node)
        return [body, run]


def _resolves_to(globals_: dict, closure: dict, expr: ast.expr, target: Any) -> bool:
    """Whether ``expr`` (a name or attribute chain) names ``target``."""
    parts = []
    while isinstance(expr, ast.Attribute):
        parts.append(expr.attr)
        expr = expr.value
    if not isinstance(expr, ast.Name):
        return False
    obj = closure.get(expr.id, globals_.get(expr.id, getattr(builtins, expr.id, None)))
    for part in reversed(parts):
        obj = getattr(obj, part, None)
    return obj is target


@contextmanager
def _collector_paused() -> Iterator[None]:
    """No garbage collection inside: CPython 3.11 (3.11.7 here) checks the
    recursion depth of its AST conversions, and a collection that runs
    finalizers in the middle of one can fail that check with "SystemError:
    AST constructor recursion depth mismatch" (seen in the tests, depending
    on what the collector finds)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def rewrite(fn: Callable) -> Callable:
    """``fn`` recompiled with its ``sl.range`` loops rewritten (cached per function)."""
    cached = _CACHE.get(fn)
    if cached is not None:
        return cached
    try:
        lines, first = inspect.getsourcelines(fn)
        filename = inspect.getsourcefile(fn) or fn.__code__.co_filename
    except (OSError, TypeError):  # no source: fine unless it has sl.range loops
        _CACHE[fn] = fn
        return fn
    with _collector_paused():
        tree = ast.parse(textwrap.dedent("".join(lines)))
    ast.increment_lineno(tree, first - 1)
    function = tree.body[0]
    if not isinstance(function, ast.FunctionDef):
        raise error(f"kernel {fn.__name__!r} must be a plain 'def' function")
    function.decorator_list = []
    closure = dict(zip(fn.__code__.co_freevars,
                       (c.cell_contents for c in (fn.__closure__ or ()))))
    rewriter = _Rewriter(function, lambda call: isinstance(call, ast.Call) and _resolves_to(
        fn.__globals__, closure, call.func, range), filename)
    rewriter.visit(function)
    if rewriter.count == 0:
        _CACHE[fn] = fn
        return fn
    # A factory binds the loop runner and the closure's free variables.
    factory = ast.FunctionDef(
        name="__sage_factory",
        args=ast.arguments(posonlyargs=[], args=[ast.arg(_RUN)] +
                           [ast.arg(n) for n in closure], kwonlyargs=[], kw_defaults=[],
                           defaults=[]),
        body=[function, ast.Return(ast.Name(function.name, ast.Load()))],
        decorator_list=[], returns=None, type_params=[])
    ast.copy_location(factory, function)
    module = ast.fix_missing_locations(ast.Module([factory], type_ignores=[]))
    namespace: dict[str, Any] = {}
    with _collector_paused():
        code = compile(module, filename, "exec")
    exec(code, fn.__globals__, namespace)
    rewritten = namespace["__sage_factory"](run_range_loop, *closure.values())
    rewritten.__defaults__ = fn.__defaults__
    rewritten.__kwdefaults__ = fn.__kwdefaults__
    rewritten.__wrapped__ = fn
    _CACHE[fn] = rewritten
    return rewritten
