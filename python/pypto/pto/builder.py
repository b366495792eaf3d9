"""PTOModule and PTOFunctionBuilder: InCore tile functions and orchestration
functions written in Python with a fluent API. The builder writes C++ IR
(``_C.PtoFunctionBuilder``); a module is linked and printed as .pto text in
C++ (``_C.link_pto``, see csrc/ir/pto_module.h)."""

from __future__ import annotations

import enum
import inspect
import os
from typing import Optional, Union

from pypto import _C, _op_table
from pypto.errors import NotSupportedError, UserError, UserTypeError
from pypto.frontend.symbolic import parse_expr


class MemorySpace(enum.Enum):
    """Where a memref lives. ``GM`` and ``GLOBAL`` are the same space."""

    GLOBAL = "gm"
    GM = "gm"


class ElementType(enum.Enum):
    """Element types, named as in .pto text."""

    F32 = "f32"
    F16 = "f16"
    BF16 = "bf16"
    F64 = "f64"
    I8 = "i8"
    I16 = "i16"
    I32 = "i32"
    I64 = "i64"
    U8 = "u8"
    BOOL = "i1"


def _dtype(v, what: str) -> str:
    if isinstance(v, ElementType):
        return v.value
    if isinstance(v, str) and v in {e.value for e in ElementType}:
        return v
    raise UserTypeError(f"{what}: expected an ElementType, found {v!r}")


def _where() -> str:
    """file:line of the first caller outside this package."""
    here = os.path.dirname(__file__)
    for fr in inspect.stack()[2:]:
        if not fr.filename.startswith(here):
            return f"{fr.filename}:{fr.lineno}"
    return "?"


def _forms(*forms: str) -> list[str]:
    """The mnemonics (without the leading ``t``) of the op table's opcodes of these forms."""
    return [r["name"][1:] for r in _op_table.opcodes() if r["form"] in forms]


_TILE_OPS_1 = _forms("unary")
_TILE_OPS_2 = _forms("binary")
_REDUCE = _forms("row reduce", "column reduce")
_EXPAND = _forms("row expand", "column expand")
# Every binary opcode has a form with a constant second operand (``tadds``, ``tcmpgts``).
_SCALAR_FORMS = [op + "s" for op in _TILE_OPS_2]


ExprLike = Union[int, str, "_C.Expr"]


class PTOFunction:
    """A built function (InCore or Orchestration) of a PTOModule: C++ IR (``_C.PtoModuleFunction``)."""

    def __init__(self, b: "PTOFunctionBuilder"):
        self._fn = b._b.build()
        self.name = b.name
        self.in_core = self._fn.in_core
        self.where = b._where

    def __repr__(self):
        return f"<PTOFunction @{self.name} ({'InCore' if self.in_core else 'Orchestration'})>"


class PTOModule:
    """A set of PTO functions; the entry is an orchestration function."""

    def __init__(self, name: str):
        if not isinstance(name, str) or not name.isidentifier():
            raise UserError(f"PTOModule: name must be an identifier, found {name!r}")
        self.name = name
        self.functions: dict[str, PTOFunction] = {}
        self._text: Optional[str] = None  # set for modules parsed from .pto text

    def add(self, fn: PTOFunction) -> PTOFunction:
        if self._text is not None:
            raise NotSupportedError(f"PTOModule '{self.name}' was parsed from .pto text; build a new module to add functions")
        if fn.name in self.functions:
            raise UserError(f"PTOModule '{self.name}': function @{fn.name} is defined twice ({fn.where})")
        self.functions[fn.name] = fn
        return fn

    def default_entry(self) -> str:
        orch = [f.name for f in self.functions.values() if not f.in_core]
        if len(orch) == 1:
            return orch[0]
        if not orch and len(self.functions) == 1:
            return next(iter(self.functions))
        raise UserError(f"PTOModule '{self.name}': pass entry=... (orchestration functions: {orch or 'none'})")

    def to_pto(self, entry: Optional[str] = None) -> str:
        """The module as .pto text, with `entry` (default: its only
        orchestration function) as the entry point: linked in C++ (calls
        between InCore functions and between orchestration functions inlined,
        block offsets in elements, parameter blocks worked out) and printed by
        the one .pto printer."""
        if self._text is not None:
            return self._text
        return _C.link_pto(self.name, [f._fn for f in self.functions.values()], entry or self.default_entry())

    def __repr__(self):
        return f"<PTOModule {self.name}: {', '.join('@' + n for n in self.functions)}>"


class PTOFunctionBuilder:
    """Fluent builder of one PTO function (see docs/pto.md)."""

    def __init__(self, name: str, module: Optional[PTOModule] = None, fused_ops=None):
        if not isinstance(name, str) or not name.isidentifier():
            raise UserError(f"PTOFunctionBuilder: name must be an identifier, found {name!r}")
        self.name = name
        self.module = module
        self._where = _where()
        self._b = _C.PtoFunctionBuilder(name, self._where)
        self._b.set_fused_ops([str(n) for n in (fused_ops or [])])
        self._defs: dict[str, "_C.Expr"] = {}  # scalar_* definitions, substituted into later expressions
        self._built = False

    # ------------------------------------------------------------ declarations
    def in_core(self):
        self._b.set_in_core(True)
        return self

    def not_in_core(self):
        self._b.set_in_core(False)
        return self

    @property
    def _in_core(self) -> bool:
        return self._b.in_core

    def _declared(self, name: str) -> bool:
        b = self._b
        return (b.memref_kind(name) is not None or b.tile_shape(name) is not None or b.has_scalar(name)
                or name in self._defs)

    def _fresh(self, name: str, what: str):
        if not isinstance(name, str) or not name.isidentifier():
            raise UserError(f"@{self.name}.{what}: name must be an identifier, found {name!r}")
        if self._declared(name):
            raise UserError(f"@{self.name}.{what}: '{name}' is already declared ({_where()})")

    def memref(self, name: str, space=MemorySpace.GLOBAL, dtype=ElementType.F32, shape=None):
        self._fresh(name, "memref")
        if not isinstance(space, MemorySpace):
            raise UserTypeError(f"@{self.name}.memref('{name}'): space must be a MemorySpace, found {space!r}")
        self._b.memref(name, "param", _dtype(dtype, f"@{self.name}.memref('{name}')"), self._shape(shape, name))
        return self

    def _shape(self, shape, name):
        if shape is None:
            return None
        if isinstance(shape, int) or not hasattr(shape, "__iter__"):
            raise UserTypeError(f"@{self.name}.memref('{name}'): shape must be a sequence of dims, found {shape!r}")
        return [self._e(d, f"@{self.name}.memref('{name}') shape") for d in shape]

    def workspace(self, name: str, shape, dtype=ElementType.F32, uninit: bool = False):
        """A global intermediate of an orchestration function, allocated per run: zeroed, or
        with unspecified contents when ``uninit`` (every element is written before it is read)."""
        self._fresh(name, "workspace")
        if shape is None:
            raise UserError(f"@{self.name}.workspace('{name}'): a shape is required")
        if not isinstance(uninit, bool):
            raise UserTypeError(f"@{self.name}.workspace('{name}'): uninit must be a bool, found {uninit!r}")
        self._b.memref(name, "workspace", _dtype(dtype, f"@{self.name}.workspace"), self._shape(shape, name),
                       not uninit)
        return self

    def output(self, name: str, space=MemorySpace.GLOBAL, dtype=ElementType.F32, shape=None):
        """An orchestration memref marked as an output (printed `out`)."""
        self.memref(name, space, dtype, shape)
        self._b.mark_output(name)
        return self

    def view(self, name: str, base: str, shape, offsets, dims, steps, dtype=ElementType.F32):
        """An orchestration memref aliasing `base` (an N-D box with a dim map and steps)."""
        self._fresh(name, "view")
        self._need_memref(base, "view")
        self._b.view(name, base, _dtype(dtype, f"@{self.name}.view"), self._shape(shape, name) or [],
                     [self._e(o, "view offset") for o in offsets], list(dims), list(steps), False)
        return self

    def reshape(self, name: str, base: str, shape, dtype=ElementType.F32):
        self._fresh(name, "reshape")
        self._need_memref(base, "reshape")
        self._b.view(name, base, _dtype(dtype, f"@{self.name}.reshape"), self._shape(shape, name) or [], [], [], [],
                     True)
        return self

    def local(self, name: str, shape, dtype=ElementType.F32):
        """An InCore local buffer (`alloc_local`)."""
        self._fresh(name, "local")
        self._b.memref(name, "local", _dtype(dtype, f"@{self.name}.local"), self._shape(shape, name))
        return self

    def tile(self, name: str, rows: int, cols: Optional[int] = None, dtype=ElementType.F32, shape=None):
        """A tile buffer `rows x cols` (or any rank through `shape=`)."""
        self._fresh(name, "tile")
        if isinstance(cols, ElementType):
            dtype, cols = cols, None
        dims = tuple(shape) if shape is not None else ((rows, cols) if cols is not None else (rows,))
        if not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in dims):
            raise UserError(f"@{self.name}.tile('{name}'): dims must be positive ints, found {dims}")
        self._b.tile(name, list(dims), _dtype(dtype, f"@{self.name}.tile('{name}')"))
        return self

    def scalar(self, name: str, dtype=ElementType.I32):
        """A scalar parameter: of the orchestration (given when the program is
        called) or of an InCore function (given by its caller)."""
        self._fresh(name, "scalar")
        self._b.scalar(name, _dtype(dtype, f"@{self.name}.scalar('{name}')"))
        return self

    # ---------------------------------------------------------------- helpers
    def _e(self, v: ExprLike, what: str) -> "_C.Expr":
        e = parse_expr(v, what)
        return e.substitute(self._defs) if self._defs else e

    def _need_tile(self, name, what) -> tuple:
        shape = self._b.tile_shape(name) if isinstance(name, str) else None
        if shape is None:
            raise UserError(f"@{self.name}.{what}: '{name}' is not a declared tile ({_where()})")
        return tuple(shape)

    def _need_memref(self, name, what) -> str:
        kind = self._b.memref_kind(name) if isinstance(name, str) else None
        if kind is None:
            raise UserError(f"@{self.name}.{what}: '{name}' is not a declared memref ({_where()})")
        return kind

    def _need_incore(self, what):
        if not self._in_core:
            raise UserError(f"@{self.name}.{what}: tile instructions belong in InCore functions; "
                            f"@{self.name} is an orchestration function ({_where()})")

    def _check_open(self):
        if self._built:
            raise UserError(f"@{self.name}: already built")

    def _instr(self, mnemonic: str, dst, srcs, **kw):
        self._check_open()
        self._b.instr(mnemonic, dst, list(srcs), **kw)
        return self

    # ------------------------------------------------------------ data moves
    def _move(self, what, a, b, row, col, offsets, valid):
        self._need_incore(what)
        if self._b.memref_kind(a) is not None and self._b.tile_shape(b) is not None:
            a, b = b, a  # the seed's .store(memref, tile) order
        shape, kind = self._need_tile(a, what), self._need_memref(b, what)
        if kind not in ("param", "local"):
            raise UserError(f"@{self.name}.{what}: '{b}' must be a parameter or local memref of the function")
        if offsets is None:
            if len(shape) != 2:
                raise UserError(f"@{self.name}.{what}: row/col offsets need a 2-D tile; give offsets=[...] "
                                f"(elements) for '{a}' {shape}")
            offsets = [_times(self._e(row, f"@{self.name}.{what} row"), shape[0]),
                       _times(self._e(col, f"@{self.name}.{what} col"), shape[1])]
        else:
            offsets = [self._e(o, f"@{self.name}.{what} offsets") for o in offsets]
        valid = [_C.Expr(d) for d in shape] if valid is None else [self._e(v, f"@{self.name}.{what} valid") for v in valid]
        return a, b, offsets, valid

    def load(self, tile: str, memref: str, row: ExprLike = 0, col: ExprLike = 0, *, offsets=None, valid=None):
        """tile <- memref at (row, col), counted in tiles of this tile's shape."""
        t, m, offs, val = self._move("load", tile, memref, row, col, offsets, valid)
        return self._instr("tload", t, [], memref=m, offsets=offs, valid=val)

    def store(self, tile: str, memref: str, row: ExprLike = 0, col: ExprLike = 0, *, offsets=None, valid=None,
              atomic: bool = False):
        """memref at (row, col) <- tile; offsets count tiles of this tile's shape. atomic=True adds the tile
        into the memory instead (`tstore ... atomic_add`, each element's addition atomic); a parameter the
        function only adds into this way is an accumulator (`accum`): calls adding into it may run at once."""
        if not isinstance(atomic, bool):
            raise UserError(f"@{self.name}.store: atomic must be a bool, found {atomic!r}")
        t, m, offs, val = self._move("store", tile, memref, row, col, offsets, valid)
        self._b.mark_output(m)
        return self._instr("tstore", None, [t], memref=m, offsets=offs, valid=val, atomic=atomic)

    # ---------------------------------------------------------- tile compute
    def instr(self, mnemonic: str, dst: Optional[str], *srcs: str, scalar=None, scalar_pos: int = -1,
              axis: Optional[int] = None, to=None, valid=None, l0=None):
        """Any PTO tile instruction by mnemonic (see docs/pto.md); `l0` is a matmul's L0 cube tile
        (m, k, n), blocks that divide its tile."""
        self._need_incore(mnemonic)
        if dst is not None:
            self._need_tile(dst, mnemonic)
        for s in srcs:
            self._need_tile(s, mnemonic)
        kw = {}
        if scalar is not None:
            kw.update(_scalar(scalar, lambda v: self._e(v, f"@{self.name}.{mnemonic} scalar")))
        if l0 is not None:
            if mnemonic not in ("tmatmul", "tmatmul_acc"):
                raise UserError(f"@{self.name}.{mnemonic}: l0 applies to tmatmul and tmatmul_acc only ({_where()})")
            if len(l0) != 3 or any(isinstance(v, bool) or not isinstance(v, int) or v <= 0 for v in l0):
                raise UserError(f"@{self.name}.{mnemonic}: l0 must be 3 positive ints (m, k, n), found {l0!r} "
                                f"({_where()})")
            kw["l0"] = list(l0)
        if to is not None:
            kw["to"] = _dtype(to, mnemonic)
        if valid is not None:
            kw["valid"] = [self._e(v, "valid") for v in valid]
        return self._instr(mnemonic, dst, srcs, scalar_pos=scalar_pos, axis=-1 if axis is None else axis, **kw)

    def _elementwise(self, op, dst, *srcs):
        d = self._need_tile(dst, op)
        for s in srcs:
            if self._need_tile(s, op) != d:
                raise UserError(f"@{self.name}.{op}: '{s}' has shape {self._need_tile(s, op)}, expected {d} "
                                f"like '{dst}' ({_where()})")
        return self.instr("t" + op, dst, *srcs)

    def _reduce(self, op, dst, src):
        d, s = self._need_tile(dst, op), self._need_tile(src, op)
        want = (s[0], 1) if op.startswith("row") else (1, s[1])
        if len(s) != 2 or d != want:
            raise UserError(f"@{self.name}.{op}: '{dst}' must have shape {want} for source '{src}' {s}, "
                            f"found {d} ({_where()})")
        return self.instr("t" + op, dst, src, valid=list(s))

    def _expand(self, op, dst, src, vec):
        d, s, v = self._need_tile(dst, op), self._need_tile(src, op), self._need_tile(vec, op)
        want = (d[0], 1) if op.startswith("row") else (1, d[1])
        if s != d or v != want:
            raise UserError(f"@{self.name}.{op}: expected '{src}' {d} and '{vec}' {want}, "
                            f"found {s} and {v} ({_where()})")
        return self.instr("t" + op, dst, src, vec)

    def _scalar_form(self, op, dst, src, value):
        if self._need_tile(src, op) != self._need_tile(dst, op):
            raise UserError(f"@{self.name}.{op}: '{src}' and '{dst}' must have the same shape")
        return self.instr("t" + op, dst, src, scalar=value, scalar_pos=1)

    def gather(self, dst: str, memref: str, index: str, axis: int, offsets, valid=None):
        """dst[i] = memref[origin + i with index[i] on `axis`] (element offsets)."""
        self._need_incore("gather")
        self._need_tile(dst, "gather")
        self._need_tile(index, "gather")
        self._need_memref(memref, "gather")
        return self._instr("tgather", dst, [index], memref=memref, axis=axis,
                           offsets=[self._e(o, "gather offsets") for o in offsets],
                           valid=[] if valid is None else [self._e(v, "valid") for v in valid])

    def scatter(self, src: str, memref: str, index: str, axis: int, offsets, valid=None):
        """memref[origin + i with index[i] on `axis`] = src[i] (element offsets)."""
        self._need_incore("scatter")
        self._need_tile(src, "scatter")
        self._need_tile(index, "scatter")
        self._need_memref(memref, "scatter")
        self._b.mark_output(memref)
        return self._instr("tscatter", None, [index, src], memref=memref, axis=axis,
                           offsets=[self._e(o, "scatter offsets") for o in offsets],
                           valid=[] if valid is None else [self._e(v, "valid") for v in valid])

    def arange(self, dst: str, start, step, offset: ExprLike = 0):
        """dst[i] = start + (offset + i) * step (1-D)."""
        self._need_incore("arange")
        self._need_tile(dst, "arange")
        return self._instr("tarange", dst, [], scalar=_number(start, "arange start"), step=_number(step, "arange step"),
                           offsets=[self._e(offset, "arange offset")])

    def random(self, dst: str, key: int, counter: int, offset: ExprLike = 0, strides=(), *, normal: bool = False,
               mantissa: int = 23, block0: ExprLike = 0, rounds: int = 10):
        """dst <- Philox4x32 draws of the stream (key, counter): uniform in [0, 1) keeping
        ``mantissa`` bits, or standard normal (Box-Muller pairs); see pypto.uniform. The tile's first
        element is stream element ``offset``; ``strides`` (one per leading tile dim) step a tile row's
        start along each leading dim. Stream element e is word e % 4 of block ``block0`` + e / 4 (the
        counter's low 64 bits); ``rounds`` is 10 or 7 (pypto.uniform_impl)."""
        self._need_incore("random")
        self._need_tile(dst, "random")
        for what, v in (("key", key), ("counter", counter)):
            if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < 2 ** 64:
                raise UserError(f"@{self.name}.random: {what} must be an int in [0, 2**64), found {v!r}")
        shape = self._b.tile_shape(dst)
        if len(strides) != len(shape) - 1:
            raise UserError(f"@{self.name}.random: a rank-{len(shape)} tile needs {len(shape) - 1} strides, "
                            f"found {list(strides)!r}")
        if rounds not in (7, 10) or isinstance(rounds, bool):
            raise UserError(f"@{self.name}.random: rounds must be 7 or 10, found {rounds!r}")
        return self._instr("trandom", dst, [], offsets=[self._e(offset, "random offset")] +
                           [self._e(s, "random strides") for s in strides] + [self._e(block0, "random block0")],
                           random=(key, counter, bool(normal), int(mantissa), int(rounds)))

    def fill(self, dst: str, value):
        """dst <- value everywhere."""
        self._need_incore("fill")
        self._need_tile(dst, "fill")
        return self._instr("tfill", dst, [], **_scalar(value, lambda v: self._e(v, "fill")))

    def cast(self, dst: str, src: str):
        """dst (its element type) <- src."""
        return self.instr("tcast", dst, src)

    def matmul(self, dst: str, a: str, b: str, l0=None):
        """dst = a @ b; `l0` = (m, k, n) blocks the product inside the tile (the L0 cube tile)."""
        self._check_mm("matmul", dst, a, b)
        return self.instr("tmatmul", dst, a, b, l0=l0)

    def matmul_acc(self, dst: str, a: str, b: str, l0=None):
        """dst += a @ b; `l0` as in matmul."""
        self._check_mm("matmul_acc", dst, a, b)
        return self.instr("tmatmul_acc", dst, dst, a, b, l0=l0)

    def _check_mm(self, op, dst, a, b):
        d, x, y = self._need_tile(dst, op), self._need_tile(a, op), self._need_tile(b, op)
        if len(x) != 2 or len(y) != 2 or x[1] != y[0] or d != (x[0], y[1]):
            raise UserError(f"@{self.name}.{op}: shapes do not chain: '{a}' {x} @ '{b}' {y} -> "
                            f"'{dst}' {d} ({_where()})")

    # -------------------------------------------------------------- scalars
    def _define(self, what, dst, value: "_C.Expr"):
        if self._declared(dst):
            raise NotSupportedError(f"@{self.name}.{what}: '{dst}' is already defined; PTO scalars defined by "
                                    f"scalar instructions are single-assignment in pypto ({_where()})")
        self._defs[dst] = value
        return self

    def scalar_li(self, dst: str, value: int):
        """dst := an integer constant."""
        return self._define("scalar_li", dst, self._e(value, "scalar_li"))

    def _scalar_op(self, what, op, dst, a, b):
        return self._define(what, dst, _C.Expr.node(op, self._e(a, what), self._e(b, what)))

    def scalar_add(self, dst, a, b):
        return self._scalar_op("scalar_add", "+", dst, a, b)

    def scalar_sub(self, dst, a, b):
        return self._scalar_op("scalar_sub", "-", dst, a, b)

    def scalar_mul(self, dst, a, b):
        return self._scalar_op("scalar_mul", "*", dst, a, b)

    def scalar_div(self, dst, a, b):
        """dst := a // b."""
        return self._scalar_op("scalar_div", "//", dst, a, b)

    def scalar_cmp(self, dst, a, b, op: str = "<"):
        """dst := 1 if `a op b` else 0 (op in < <= == != > >=)."""
        if op not in ("<", "<=", "==", "!=", ">", ">="):
            raise UserError(f"@{self.name}.scalar_cmp: unknown comparison {op!r}")
        x, y = self._e(a, "scalar_cmp"), self._e(b, "scalar_cmp")
        if op in (">", ">="):
            op, x, y = op.replace(">", "<"), y, x
        return self._define("scalar_cmp", dst, _C.Expr.node(op, x, y))

    # --------------------------------------------------------- control flow
    def for_loop(self, var: str, start: ExprLike, end: ExprLike, step: ExprLike = 1, max_range=None, min_range=None,
                 tile_levels=None, *, parallel=None):
        """FOR var in [start, end) by step. In an orchestration function,
        `max_range`/`min_range` request binary expansion of a dynamic bound and
        `tile_levels` ({block size: tile rows, 0: base rows}) adaptive tiles."""
        if (not isinstance(var, str) or not var.isidentifier() or self._b.tile_shape(var) is not None
                or self._b.memref_kind(var) is not None):
            raise UserError(f"@{self.name}.for_loop: loop variable must be a new identifier, found {var!r}")
        rng = None
        if max_range is not None or min_range is not None or tile_levels is not None:
            if self._in_core:
                raise UserError(f"@{self.name}.for_loop('{var}'): max_range/min_range/tile_levels apply to "
                                f"orchestration loops only")
            if max_range is None or min_range is None:
                raise UserError(f"@{self.name}.for_loop('{var}'): give both max_range and min_range")
            levels = {int(k): int(v) for k, v in (tile_levels or {}).items()}
            rng = (int(max_range), int(min_range), levels)
        self._check_open()
        self._b.begin_for(var, self._e(start, "for_loop start"), self._e(end, "for_loop end"),
                          self._e(step, "for_loop step"), rng, tuple(parallel) if parallel else None)
        return self

    def end_for(self):
        if not self._b.end(loop=True):
            raise UserError(f"@{self.name}.end_for: no open for_loop ({_where()})")
        return self

    def if_then(self, cond: ExprLike):
        """IF cond (non-zero) ... [else_()] ... end_if(); `cond` is an integer
        expression over scalars and loop variables."""
        self._check_open()
        self._b.begin_if(self._e(cond, "if_then"))
        return self

    def else_(self):
        if not self._b.begin_else():
            raise UserError(f"@{self.name}.else_: no open if_then ({_where()})")
        return self

    def end_if(self):
        if not self._b.end(loop=False):
            raise UserError(f"@{self.name}.end_if: no open if_then ({_where()})")
        return self

    def call(self, name: str, args: Optional[dict] = None, *, regions: Optional[dict] = None):
        """CALL @name. `args` maps each parameter of the callee to a memref
        name, to (memref, row_offset, col_offset) in units of the callee's
        block for that parameter, or, for a scalar parameter, to an
        expression. `regions` gives explicit element boxes instead:
        {param: (memref, [offsets], [extents])}."""
        where = _where()
        out_args, scalars = {}, {}
        for p, v in (args or {}).items():
            if isinstance(v, tuple):
                if len(v) != 3:
                    raise UserError(f"@{self.name}.call('{name}'): argument '{p}' must be (tensor, row, col), found {v!r}")
                self._need_memref(v[0], f"call('{name}')")
                out_args[p] = (p, v[0], [self._e(v[1], "call row offset"), self._e(v[2], "call col offset")], None, True)
            elif isinstance(v, str) and self._b.memref_kind(v) is not None:
                out_args[p] = (p, v, None, None, True)
            else:
                scalars[p] = self._e(v, f"@{self.name}.call('{name}') scalar '{p}'")
        for p, v in (regions or {}).items():
            m, offs, exts = v
            self._need_memref(m, f"call('{name}')")
            out_args[p] = (p, m, [self._e(o, "call offsets") for o in offs], [self._e(e, "call extents") for e in exts],
                           False)
        self._check_open()
        self._b.call(name, list(out_args.values()), list(scalars.items()), where)
        return self

    # ------------------------------------------------------------------ build
    def build(self) -> PTOFunction:
        kind = self._b.open_block()
        if kind:
            opener = "for_loop" if kind == "for" else "if_then"
            raise UserError(f"@{self.name}.build: {opener} is still open (missing end_{'for' if kind == 'for' else 'if'})")
        if self._built:
            raise UserError(f"@{self.name}: already built")
        self._built = True
        fn = PTOFunction(self)
        if self.module is not None:
            self.module.add(fn)
        return fn


def _times(e: "_C.Expr", k: int) -> "_C.Expr":
    """e * k, folded when k is 1 or e is a constant (tile-unit offsets)."""
    if k == 1:
        return e
    c = e.as_const()
    if c is not None:
        return _C.Expr(c * k)
    return _C.Expr.node("*", e, _C.Expr(k))


def _number(value, what: str) -> float:
    """A numeric constant: a number or the text of one ("-inf", "1e-06")."""
    if isinstance(value, bool):
        raise UserTypeError(f"{what}: expected a number, found {value!r}")
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
    raise UserTypeError(f"{what}: expected a number, found {value!r}")


def _scalar(value, as_expr) -> dict:
    """A constant operand as the instruction holds it: a number (``scalar``) or an integer
    expression (``scalar_expr``; also an integer a double does not hold exactly)."""
    if isinstance(value, bool):
        raise UserTypeError(f"scalar operand: expected a number or an integer expression, found {value!r}")
    if isinstance(value, float):
        return {"scalar": value}
    if isinstance(value, int):
        return {"scalar": float(value)} if repr(float(value)) in (str(value), f"{value}.0") else {"scalar_expr": _C.Expr(value)}
    if isinstance(value, str):
        try:
            return _scalar(int(value.strip()), as_expr) if value.strip().lstrip("-").isdigit() else {"scalar": float(value)}
        except ValueError:
            pass
    return {"scalar_expr": as_expr(value)}


def _add_methods():
    def unary(op):
        return lambda self, dst, src: self._elementwise(op, dst, src)

    def binary(op):
        return lambda self, dst, a, b: self._elementwise(op, dst, a, b)

    for op in _TILE_OPS_1:
        setattr(PTOFunctionBuilder, op if op != "not" else "not_", unary(op))
    for op in _TILE_OPS_2:
        setattr(PTOFunctionBuilder, op, binary(op))
    for op in _REDUCE:
        setattr(PTOFunctionBuilder, op, lambda self, dst, src, _op=op: self._reduce(_op, dst, src))
    for op in _EXPAND:
        setattr(PTOFunctionBuilder, op, lambda self, dst, src, vec, _op=op: self._expand(_op, dst, src, vec))
    for op in _SCALAR_FORMS:
        setattr(PTOFunctionBuilder, op, lambda self, dst, src, value, _op=op: self._scalar_form(_op, dst, src, value))


_add_methods()
