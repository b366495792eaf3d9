"""PTOModule and PTOFunctionBuilder: InCore tile functions and orchestration
functions written in Python with a fluent API, turned into .pto text that the
C++ parser reads (one source of truth for the program's meaning)."""

from __future__ import annotations

import enum
import inspect
import os
from dataclasses import dataclass, field
from typing import Optional

from pypto import _op_table
from pypto.errors import NotSupportedError, UserError, UserTypeError
from pypto.pto import _expr as X
from pypto.pto._expr import E, ExprLike


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


# ---------------------------------------------------------------- statements

@dataclass
class _Instr:
    mnemonic: str               # e.g. "tadd", "tadds", "tload"
    dst: Optional[str]
    srcs: list                  # tile names (tgather: [index]; tscatter: [index, data])
    memref: Optional[str] = None
    offsets: Optional[list] = None  # element offsets (E)
    valid: Optional[list] = None    # valid extents (E)
    scalar: Optional[str] = None    # text of a constant operand / tfill value
    scalar_pos: int = -1
    axis: Optional[int] = None
    to: Optional[str] = None
    arange: Optional[tuple] = None  # (start text, step text, offset E)
    l0: Optional[list] = None       # TMATMUL*: the L0 cube tile (m, k, n)


@dataclass
class _Loop:
    var: str
    start: E
    stop: E
    step: E
    body: list = field(default_factory=list)
    range: Optional[tuple] = None       # (max_range, min_range, {level: rows})
    parallel: Optional[tuple] = None    # (dim, tile) of a parallel grid loop


@dataclass
class _If:
    cond: E
    then: list = field(default_factory=list)
    orelse: list = field(default_factory=list)


@dataclass
class _Call:
    callee: str
    args: dict                 # param -> (memref, [E offsets], [E extents] or None, unit-offsets?)
    scalars: dict              # scalar param -> E
    where: str = "?"


@dataclass
class _MemRef:
    name: str
    dtype: str
    shape: Optional[list]      # list[E] or None
    kind: str = "param"        # param | workspace | local | view | reshape
    out: bool = False
    view: Optional[tuple] = None  # ("view", base, offsets, dims, steps) | ("reshape", base)


@dataclass
class _Tile:
    name: str
    shape: tuple
    dtype: str


def _forms(*forms: str) -> list[str]:
    """The mnemonics (without the leading ``t``) of the op table's opcodes of these forms."""
    return [r["name"][1:] for r in _op_table.opcodes() if r["form"] in forms]


_TILE_OPS_1 = _forms("unary")
_TILE_OPS_2 = _forms("binary")
_REDUCE = _forms("row reduce", "column reduce")
_EXPAND = _forms("row expand", "column expand")
# Every binary opcode has a form with a constant second operand (``tadds``, ``tcmpgts``).
_SCALAR_FORMS = [op + "s" for op in _TILE_OPS_2]


class PTOFunction:
    """A built function (InCore or Orchestration) of a PTOModule."""

    def __init__(self, b: "PTOFunctionBuilder"):
        self.name = b.name
        self.in_core = b._in_core
        self.memrefs: dict[str, _MemRef] = dict(b._memrefs)
        self.tiles: dict[str, _Tile] = dict(b._tiles)
        self.scalars: dict[str, str] = dict(b._scalars)
        self.body: list = b._stack[0]
        self.fused_ops = list(b._fused_ops)
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
        orchestration function) as the entry point."""
        if self._text is not None:
            return self._text
        from pypto.pto import _emit

        return _emit.module_text(self, entry or self.default_entry())

    def __repr__(self):
        return f"<PTOModule {self.name}: {', '.join('@' + n for n in self.functions)}>"


class PTOFunctionBuilder:
    """Fluent builder of one PTO function (see docs/pto.md)."""

    def __init__(self, name: str, module: Optional[PTOModule] = None, fused_ops=None):
        if not isinstance(name, str) or not name.isidentifier():
            raise UserError(f"PTOFunctionBuilder: name must be an identifier, found {name!r}")
        self.name = name
        self.module = module
        self._in_core = True
        self._memrefs: dict[str, _MemRef] = {}
        self._tiles: dict[str, _Tile] = {}
        self._scalars: dict[str, str] = {}
        self._defs: dict[str, E] = {}      # scalar_* definitions, substituted into later expressions
        self._stack: list[list] = [[]]
        self._open: list = []               # open _Loop / _If
        self._fused_ops = list(fused_ops or [])
        self._where = _where()
        self._built = False

    # ------------------------------------------------------------ declarations
    def in_core(self):
        self._in_core = True
        return self

    def not_in_core(self):
        self._in_core = False
        return self

    def _fresh(self, name: str, what: str):
        if not isinstance(name, str) or not name.isidentifier():
            raise UserError(f"@{self.name}.{what}: name must be an identifier, found {name!r}")
        if name in self._memrefs or name in self._tiles or name in self._scalars or name in self._defs:
            raise UserError(f"@{self.name}.{what}: '{name}' is already declared ({_where()})")

    def memref(self, name: str, space=MemorySpace.GLOBAL, dtype=ElementType.F32, shape=None):
        self._fresh(name, "memref")
        if not isinstance(space, MemorySpace):
            raise UserTypeError(f"@{self.name}.memref('{name}'): space must be a MemorySpace, found {space!r}")
        self._memrefs[name] = _MemRef(name, _dtype(dtype, f"@{self.name}.memref('{name}')"), self._shape(shape, name))
        return self

    def _shape(self, shape, name):
        if shape is None:
            return None
        if isinstance(shape, int) or not hasattr(shape, "__iter__"):
            raise UserTypeError(f"@{self.name}.memref('{name}'): shape must be a sequence of dims, found {shape!r}")
        return [self._e(d, f"@{self.name}.memref('{name}') shape") for d in shape]

    def workspace(self, name: str, shape, dtype=ElementType.F32):
        """A global intermediate of an orchestration function, allocated per run."""
        self._fresh(name, "workspace")
        if shape is None:
            raise UserError(f"@{self.name}.workspace('{name}'): a shape is required")
        self._memrefs[name] = _MemRef(name, _dtype(dtype, f"@{self.name}.workspace"), self._shape(shape, name), "workspace")
        return self

    def output(self, name: str, space=MemorySpace.GLOBAL, dtype=ElementType.F32, shape=None):
        """An orchestration memref marked as an output (printed `out`)."""
        self.memref(name, space, dtype, shape)
        self._memrefs[name].out = True
        return self

    def view(self, name: str, base: str, shape, offsets, dims, steps, dtype=ElementType.F32):
        """An orchestration memref aliasing `base` (an N-D box with a dim map and steps)."""
        self._fresh(name, "view")
        self._need_memref(base, "view")
        self._memrefs[name] = _MemRef(name, _dtype(dtype, f"@{self.name}.view"), self._shape(shape, name), "view",
                                      view=("view", base, [self._e(o, "view offset") for o in offsets], list(dims),
                                            list(steps)))
        return self

    def reshape(self, name: str, base: str, shape, dtype=ElementType.F32):
        self._fresh(name, "reshape")
        self._need_memref(base, "reshape")
        self._memrefs[name] = _MemRef(name, _dtype(dtype, f"@{self.name}.reshape"), self._shape(shape, name), "reshape",
                                      view=("reshape", base))
        return self

    def local(self, name: str, shape, dtype=ElementType.F32):
        """An InCore local buffer (`alloc_local`)."""
        self._fresh(name, "local")
        self._memrefs[name] = _MemRef(name, _dtype(dtype, f"@{self.name}.local"), self._shape(shape, name), "local")
        return self

    def tile(self, name: str, rows: int, cols: Optional[int] = None, dtype=ElementType.F32, shape=None):
        """A tile buffer `rows x cols` (or any rank through `shape=`)."""
        self._fresh(name, "tile")
        if isinstance(cols, ElementType):
            dtype, cols = cols, None
        dims = tuple(shape) if shape is not None else ((rows, cols) if cols is not None else (rows,))
        if not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in dims):
            raise UserError(f"@{self.name}.tile('{name}'): dims must be positive ints, found {dims}")
        self._tiles[name] = _Tile(name, dims, _dtype(dtype, f"@{self.name}.tile('{name}')"))
        return self

    def scalar(self, name: str, dtype=ElementType.I32):
        """A scalar parameter: of the orchestration (given when the program is
        called) or of an InCore function (given by its caller)."""
        self._fresh(name, "scalar")
        self._scalars[name] = _dtype(dtype, f"@{self.name}.scalar('{name}')")
        return self

    # ---------------------------------------------------------------- helpers
    def _e(self, v: ExprLike, what: str) -> E:
        e = X.parse(v, what)
        return e.subst(self._defs) if self._defs else e

    def _need_tile(self, name, what) -> _Tile:
        if name not in self._tiles:
            raise UserError(f"@{self.name}.{what}: '{name}' is not a declared tile ({_where()})")
        return self._tiles[name]

    def _need_memref(self, name, what) -> _MemRef:
        if name not in self._memrefs:
            raise UserError(f"@{self.name}.{what}: '{name}' is not a declared memref ({_where()})")
        return self._memrefs[name]

    def _need_incore(self, what):
        if not self._in_core:
            raise UserError(f"@{self.name}.{what}: tile instructions belong in InCore functions; "
                            f"@{self.name} is an orchestration function ({_where()})")

    def _add(self, stmt):
        if self._built:
            raise UserError(f"@{self.name}: already built")
        self._stack[-1].append(stmt)
        return self

    # ------------------------------------------------------------ data moves
    def _move(self, what, a, b, row, col, offsets, valid):
        self._need_incore(what)
        if a in self._memrefs and b in self._tiles:
            a, b = b, a  # the seed's .store(memref, tile) order
        t, m = self._need_tile(a, what), self._need_memref(b, what)
        if m.kind not in ("param", "local"):
            raise UserError(f"@{self.name}.{what}: '{b}' must be a parameter or local memref of the function")
        if offsets is None:
            if len(t.shape) != 2:
                raise UserError(f"@{self.name}.{what}: row/col offsets need a 2-D tile; give offsets=[...] "
                                f"(elements) for '{a}' {t.shape}")
            offsets = [X.mul(self._e(row, f"@{self.name}.{what} row"), t.shape[0]),
                       X.mul(self._e(col, f"@{self.name}.{what} col"), t.shape[1])]
        else:
            offsets = [self._e(o, f"@{self.name}.{what} offsets") for o in offsets]
        valid = [X.const(d) for d in t.shape] if valid is None else [self._e(v, f"@{self.name}.{what} valid") for v in valid]
        return a, b, offsets, valid

    def load(self, tile: str, memref: str, row: ExprLike = 0, col: ExprLike = 0, *, offsets=None, valid=None):
        """tile <- memref at (row, col), counted in tiles of this tile's shape."""
        t, m, offs, val = self._move("load", tile, memref, row, col, offsets, valid)
        return self._add(_Instr("tload", t, [], m, offs, val))

    def store(self, tile: str, memref: str, row: ExprLike = 0, col: ExprLike = 0, *, offsets=None, valid=None):
        """memref at (row, col) <- tile; offsets count tiles of this tile's shape."""
        t, m, offs, val = self._move("store", tile, memref, row, col, offsets, valid)
        if self._memrefs[m].kind == "param":
            self._memrefs[m].out = True
        return self._add(_Instr("tstore", None, [t], m, offs, val))

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
        sc = None
        if scalar is not None:
            sc = _scalar_text(scalar, lambda v: self._e(v, f"@{self.name}.{mnemonic} scalar"))
        if l0 is not None:
            if mnemonic not in ("tmatmul", "tmatmul_acc"):
                raise UserError(f"@{self.name}.{mnemonic}: l0 applies to tmatmul and tmatmul_acc only ({_where()})")
            if len(l0) != 3 or any(isinstance(v, bool) or not isinstance(v, int) or v <= 0 for v in l0):
                raise UserError(f"@{self.name}.{mnemonic}: l0 must be 3 positive ints (m, k, n), found {l0!r} "
                                f"({_where()})")
        return self._add(_Instr(mnemonic, dst, list(srcs), scalar=sc, scalar_pos=scalar_pos, axis=axis,
                                to=_dtype(to, mnemonic) if to is not None else None,
                                valid=None if valid is None else [self._e(v, "valid") for v in valid],
                                l0=None if l0 is None else list(l0)))

    def _elementwise(self, op, dst, *srcs):
        d = self._need_tile(dst, op)
        for s in srcs:
            if self._need_tile(s, op).shape != d.shape:
                raise UserError(f"@{self.name}.{op}: '{s}' has shape {self._tiles[s].shape}, expected {d.shape} "
                                f"like '{dst}' ({_where()})")
        return self.instr("t" + op, dst, *srcs)

    def _reduce(self, op, dst, src):
        d, s = self._need_tile(dst, op), self._need_tile(src, op)
        want = (s.shape[0], 1) if op.startswith("row") else (1, s.shape[1])
        if len(s.shape) != 2 or d.shape != want:
            raise UserError(f"@{self.name}.{op}: '{dst}' must have shape {want} for source '{src}' {s.shape}, "
                            f"found {d.shape} ({_where()})")
        return self.instr("t" + op, dst, src, valid=list(s.shape))

    def _expand(self, op, dst, src, vec):
        d, s, v = self._need_tile(dst, op), self._need_tile(src, op), self._need_tile(vec, op)
        want = (d.shape[0], 1) if op.startswith("row") else (1, d.shape[1])
        if s.shape != d.shape or v.shape != want:
            raise UserError(f"@{self.name}.{op}: expected '{src}' {d.shape} and '{vec}' {want}, "
                            f"found {s.shape} and {v.shape} ({_where()})")
        return self.instr("t" + op, dst, src, vec)

    def _scalar_form(self, op, dst, src, value):
        if self._need_tile(src, op).shape != self._need_tile(dst, op).shape:
            raise UserError(f"@{self.name}.{op}: '{src}' and '{dst}' must have the same shape")
        return self.instr("t" + op, dst, src, scalar=value, scalar_pos=1)

    def gather(self, dst: str, memref: str, index: str, axis: int, offsets, valid=None):
        """dst[i] = memref[origin + i with index[i] on `axis`] (element offsets)."""
        self._need_incore("gather")
        self._need_tile(dst, "gather")
        self._need_tile(index, "gather")
        self._need_memref(memref, "gather")
        return self._add(_Instr("tgather", dst, [index], memref, [self._e(o, "gather offsets") for o in offsets],
                                None if valid is None else [self._e(v, "valid") for v in valid], axis=axis))

    def scatter(self, src: str, memref: str, index: str, axis: int, offsets, valid=None):
        """memref[origin + i with index[i] on `axis`] = src[i] (element offsets)."""
        self._need_incore("scatter")
        self._need_tile(src, "scatter")
        self._need_tile(index, "scatter")
        if self._need_memref(memref, "scatter").kind == "param":
            self._memrefs[memref].out = True
        return self._add(_Instr("tscatter", None, [index, src], memref, [self._e(o, "scatter offsets") for o in offsets],
                                None if valid is None else [self._e(v, "valid") for v in valid], axis=axis))

    def arange(self, dst: str, start, step, offset: ExprLike = 0):
        """dst[i] = start + (offset + i) * step (1-D)."""
        self._need_incore("arange")
        self._need_tile(dst, "arange")
        num = lambda v: _scalar_text(v, lambda x: self._e(x, "arange"))  # noqa: E731
        return self._add(_Instr("tarange", dst, [], arange=(num(start), num(step), self._e(offset, "arange offset"))))

    def fill(self, dst: str, value):
        """dst <- value everywhere."""
        self._need_incore("fill")
        self._need_tile(dst, "fill")
        return self._add(_Instr("tfill", dst, [], scalar=_scalar_text(value, lambda v: self._e(v, "fill"))))

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
        if len(x.shape) != 2 or len(y.shape) != 2 or x.shape[1] != y.shape[0] or d.shape != (x.shape[0], y.shape[1]):
            raise UserError(f"@{self.name}.{op}: shapes do not chain: '{a}' {x.shape} @ '{b}' {y.shape} -> "
                            f"'{dst}' {d.shape} ({_where()})")

    # -------------------------------------------------------------- scalars
    def _define(self, what, dst, value: E):
        if dst in self._scalars or dst in self._defs or dst in self._tiles or dst in self._memrefs:
            raise NotSupportedError(f"@{self.name}.{what}: '{dst}' is already defined; PTO scalars defined by "
                                    f"scalar instructions are single-assignment in pypto ({_where()})")
        self._defs[dst] = value
        return self

    def scalar_li(self, dst: str, value: int):
        """dst := an integer constant."""
        return self._define("scalar_li", dst, self._e(value, "scalar_li"))

    def scalar_add(self, dst, a, b):
        return self._define("scalar_add", dst, E("+", self._e(a, "scalar_add"), self._e(b, "scalar_add")))

    def scalar_sub(self, dst, a, b):
        return self._define("scalar_sub", dst, E("-", self._e(a, "scalar_sub"), self._e(b, "scalar_sub")))

    def scalar_mul(self, dst, a, b):
        return self._define("scalar_mul", dst, E("*", self._e(a, "scalar_mul"), self._e(b, "scalar_mul")))

    def scalar_div(self, dst, a, b):
        """dst := a // b."""
        return self._define("scalar_div", dst, E("//", self._e(a, "scalar_div"), self._e(b, "scalar_div")))

    def scalar_cmp(self, dst, a, b, op: str = "<"):
        """dst := 1 if `a op b` else 0 (op in < <= == != > >=)."""
        if op not in ("<", "<=", "==", "!=", ">", ">="):
            raise UserError(f"@{self.name}.scalar_cmp: unknown comparison {op!r}")
        return self._define("scalar_cmp", dst, X.parse(f"({self._e(a, 'scalar_cmp').text()}) {op} "
                                                         f"({self._e(b, 'scalar_cmp').text()})", "scalar_cmp"))

    # --------------------------------------------------------- control flow
    def for_loop(self, var: str, start: ExprLike, end: ExprLike, step: ExprLike = 1, max_range=None, min_range=None,
                 tile_levels=None, *, parallel=None):
        """FOR var in [start, end) by step. In an orchestration function,
        `max_range`/`min_range` request binary expansion of a dynamic bound and
        `tile_levels` ({block size: tile rows, 0: base rows}) adaptive tiles."""
        if not isinstance(var, str) or not var.isidentifier() or var in self._tiles or var in self._memrefs:
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
        loop = _Loop(var, self._e(start, "for_loop start"), self._e(end, "for_loop end"), self._e(step, "for_loop step"),
                     range=rng, parallel=tuple(parallel) if parallel else None)
        self._add(loop)
        self._open.append(loop)
        self._stack.append(loop.body)
        return self

    def end_for(self):
        return self._close(_Loop, "end_for", "for_loop")

    def _close(self, kind, method: str, opener: str):
        """Closes the innermost open block, which must be a `kind` opened by `opener`."""
        if not self._open or not isinstance(self._open[-1], kind):
            raise UserError(f"@{self.name}.{method}: no open {opener} ({_where()})")
        self._open.pop()
        self._stack.pop()
        return self

    def if_then(self, cond: ExprLike):
        """IF cond (non-zero) ... [else_()] ... end_if(); `cond` is an integer
        expression over scalars and loop variables."""
        node = _If(self._e(cond, "if_then"))
        self._add(node)
        self._open.append(node)
        self._stack.append(node.then)
        return self

    def else_(self):
        if not self._open or not isinstance(self._open[-1], _If) or self._stack[-1] is not self._open[-1].then:
            raise UserError(f"@{self.name}.else_: no open if_then ({_where()})")
        self._stack[-1] = self._open[-1].orelse
        return self

    def end_if(self):
        return self._close(_If, "end_if", "if_then")

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
                out_args[p] = (v[0], [self._e(v[1], "call row offset"), self._e(v[2], "call col offset")], None, True)
            elif isinstance(v, str) and v in self._memrefs:
                out_args[p] = (v, None, None, True)
            else:
                scalars[p] = self._e(v, f"@{self.name}.call('{name}') scalar '{p}'")
        for p, v in (regions or {}).items():
            m, offs, exts = v
            self._need_memref(m, f"call('{name}')")
            out_args[p] = (m, [self._e(o, "call offsets") for o in offs], [self._e(e, "call extents") for e in exts], False)
        return self._add(_Call(name, out_args, scalars, where))

    # ------------------------------------------------------------------ build
    def build(self) -> PTOFunction:
        if self._open:
            kind = "for_loop" if isinstance(self._open[-1], _Loop) else "if_then"
            raise UserError(f"@{self.name}.build: {kind} is still open (missing end_{'for' if kind == 'for_loop' else 'if'})")
        if self._built:
            raise UserError(f"@{self.name}: already built")
        self._built = True
        fn = PTOFunction(self)
        if self.module is not None:
            self.module.add(fn)
        return fn


def _scalar_text(value, as_expr) -> str:
    if isinstance(value, bool):
        raise UserTypeError(f"scalar operand: expected a number or an integer expression, found {value!r}")
    if isinstance(value, float):
        return repr(value) if value == value and abs(value) != float("inf") else str(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        try:
            float(value)
            return value.strip()  # a number written as text ("-inf", "1e-06")
        except ValueError:
            pass
    return as_expr(value).text()


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
