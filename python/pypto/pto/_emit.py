"""A builder-made PTOModule as .pto text: InCore calls inside InCore
functions are inlined, orchestration calls to orchestration functions are
inlined, tile-unit offsets become element offsets, and each InCore
parameter's block shape (the bounding box of the tiles moved through it) is
worked out."""

from __future__ import annotations

import copy
import re
from typing import Optional

from pypto.errors import UserError
from pypto.pto import _expr as X
from pypto.pto._expr import E
from pypto.pto.builder import PTOFunction, PTOModule, _Call, _If, _Instr, _Loop, _MemRef, _Tile


def _fused_name(name: str) -> str:
    """A name of a function's fused=[...] list: bare when it is a name, else quoted."""
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", name):
        return name
    return '"' + name.replace('"', "'") + '"'


def _fmt_dims(dims: list[E]) -> str:
    out = []
    for d in dims:
        t = d.text()
        out.append(t if d.op == "const" or t.startswith("(") else f"({t})")
    return "x".join(out)


def _memref_type(m: _MemRef, shape: list[E]) -> str:
    space = "local" if m.kind == "local" else "gm"
    return f"!pto.memref<{space},{_fmt_dims(shape)},{m.dtype}>"


def _tile_type(t: _Tile) -> str:
    return f"!pto.tile<{'x'.join(str(d) for d in t.shape)}x{t.dtype}>"


class _InCore:
    """An InCore function after inlining, with its parameter blocks."""

    def __init__(self, fn: PTOFunction, module: PTOModule, stack: tuple):
        self.fn = fn
        self.memrefs: dict[str, _MemRef] = {k: copy.copy(v) for k, v in fn.memrefs.items()}
        self.tiles: dict[str, _Tile] = dict(fn.tiles)
        self.scalars = list(fn.scalars)
        self.counter = 0
        self.body = self._inline(fn.body, module, stack + (fn.name,))
        self.blocks = {name: self._block(m) for name, m in self.memrefs.items() if m.kind == "param"}
        self.outs = {name for name in self.blocks if self._stores(self.body, name)}

    # -- inlining InCore calls
    def _inline(self, body: list, module: PTOModule, stack: tuple) -> list:
        out = []
        for s in body:
            if isinstance(s, _Loop):
                s = copy.copy(s)
                s.body = self._inline(s.body, module, stack)
                out.append(s)
            elif isinstance(s, _If):
                out.append(_If(s.cond, self._inline(s.then, module, stack), self._inline(s.orelse, module, stack)))
            elif isinstance(s, _Call):
                out.extend(self._inline_call(s, module, stack))
            else:
                out.append(s)
        return out

    def _inline_call(self, c: _Call, module: PTOModule, stack: tuple) -> list:
        callee = module.functions.get(c.callee)
        if callee is None:
            raise UserError(f"@{self.fn.name}: CALL @{c.callee} names no function of module '{module.name}' ({c.where})")
        if not callee.in_core:
            raise UserError(f"@{self.fn.name}: an InCore function cannot call orchestration function @{c.callee} ({c.where})")
        if callee.name in stack:
            raise UserError(f"@{self.fn.name}: recursive CALL @{c.callee} ({c.where})")
        inner = _InCore(callee, module, stack)
        self.counter += 1
        prefix = f"{callee.name}{self.counter}_"
        env: dict[str, E] = {}
        for sname in inner.scalars:
            if sname not in c.scalars:
                raise UserError(f"@{self.fn.name}: CALL @{c.callee} misses scalar '{sname}' ({c.where})")
            env[sname] = c.scalars[sname]
        mem_map: dict[str, tuple[str, list[E]]] = {}
        for pname in inner.blocks:
            if pname not in c.args:
                raise UserError(f"@{self.fn.name}: CALL @{c.callee} misses parameter '{pname}' ({c.where})")
            m, offs, _, units = c.args[pname]
            if m not in self.memrefs:
                raise UserError(f"@{self.fn.name}: CALL @{c.callee}: '{m}' is not a memref of @{self.fn.name}")
            block = inner.blocks[pname]
            if offs is None:
                offs = [X.const(0)] * len(block)
            elif units:
                offs = [X.mul(o, b.a) if b.op == "const" else E("*", o, b) for o, b in zip(offs, block)]
            mem_map[pname] = (m, offs)
        for extra in set(c.args) - set(inner.blocks):
            raise UserError(f"@{self.fn.name}: CALL @{c.callee} has no parameter '{extra}' ({c.where})")
        for name, m in inner.memrefs.items():
            if m.kind == "local":
                mem_map[name] = (prefix + name, None)
                self.memrefs[prefix + name] = _MemRef(prefix + name, m.dtype, m.shape, "local")
        tile_map = {}
        for name, t in inner.tiles.items():
            tile_map[name] = prefix + name
            self.tiles[prefix + name] = _Tile(prefix + name, t.shape, t.dtype)
        return _rename(inner.body, env, tile_map, mem_map, prefix)

    # -- parameter blocks
    def _block(self, m: _MemRef) -> list[E]:
        if m.shape is not None:
            return m.shape
        hi: Optional[list[int]] = None
        for offs, shape in self._accesses(self.body, m.name, {}):
            if hi is None:
                hi = [0] * len(shape)
            if len(shape) != len(hi):
                raise UserError(f"@{self.fn.name}: parameter '{m.name}' is moved with tiles of different ranks")
            for d, (o, ext) in enumerate(zip(offs, shape)):
                hi[d] = max(hi[d], o + ext)
        if hi is None:
            raise UserError(f"@{self.fn.name}: parameter '{m.name}' is never loaded or stored; "
                            f"give memref(..., shape=...)")
        return [X.const(h) for h in hi]

    def _accesses(self, body, name, ranges):
        for s in body:
            if isinstance(s, _Loop):
                try:
                    lo, hi, st = (X.evaluate(x, {}) for x in (s.start, s.stop, s.step))
                except KeyError:
                    raise UserError(f"@{self.fn.name}: the block of parameter '{name}' cannot be bounded: loop "
                                    f"'{s.var}' has a bound that is not a constant; give memref(..., shape=...)") from None
                if hi <= lo:
                    continue
                r = dict(ranges)
                r[s.var] = (lo, lo + (hi - 1 - lo) // st * st)
                yield from self._accesses(s.body, name, r)
            elif isinstance(s, _If):
                yield from self._accesses(s.then + s.orelse, name, ranges)
            elif isinstance(s, _Instr) and s.memref == name:
                tile = self.tiles[s.dst if s.mnemonic in ("tload", "tgather") else s.srcs[-1]]
                env_hi = {k: v[1] for k, v in ranges.items()}
                env_lo = {k: v[0] for k, v in ranges.items()}
                try:
                    his = [X.evaluate(o, env_hi) for o in s.offsets]
                    los = [X.evaluate(o, env_lo) for o in s.offsets]
                except KeyError as e:
                    raise UserError(f"@{self.fn.name}: the block of parameter '{name}' cannot be bounded: an offset "
                                    f"uses '{e.args[0]}'; give memref(..., shape=...)") from None
                if any(v < 0 for v in los):
                    raise UserError(f"@{self.fn.name}: a negative offset into parameter '{name}'")
                yield his, tile.shape

    def _stores(self, body, name) -> bool:
        for s in body:
            if isinstance(s, _Loop) and self._stores(s.body, name):
                return True
            if isinstance(s, _If) and self._stores(s.then + s.orelse, name):
                return True
            if isinstance(s, _Instr) and s.memref == name and s.mnemonic in ("tstore", "tscatter"):
                return True
        return False

    def text(self) -> str:
        f = self.fn
        attrs = " buffer_bytes=0"
        if f.fused_ops:
            attrs += f" fused=[{', '.join(_fused_name(n) for n in f.fused_ops)}]"
        lines = []
        params = [f"%{n}: {_memref_type(self.memrefs[n], b)}{' out' if n in self.outs else ''}"
                  for n, b in self.blocks.items()]
        params += [f"%{s}: index" for s in self.scalars]
        lines.append(f"incore func @{f.name}({', '.join(params)}){attrs} {{")
        for m in self.memrefs.values():
            if m.kind == "local":
                lines.append(f"  %{m.name} = alloc_local : {_memref_type(m, m.shape)}")
        for t in self.tiles.values():
            lines.append(f"  %{t.name} = alloc_tile : {_tile_type(t)}")
        _stmts(lines, self.body, 1, self.tiles, None)
        lines += ["  return", "}"]
        return "\n".join(lines) + "\n"


def _rename(body, env, tile_map, mem_map, prefix):
    """A copy of an inlined body: scalars substituted, tiles and loop
    variables renamed, memory accesses moved to the caller's memrefs."""
    out = []
    for s in body:
        if isinstance(s, _Loop):
            v = prefix + s.var
            inner_env = dict(env)
            inner_env[s.var] = X.var(v)
            out.append(_Loop(v, s.start.subst(env), s.stop.subst(env), s.step.subst(env),
                             _rename(s.body, inner_env, tile_map, mem_map, prefix)))
        elif isinstance(s, _If):
            out.append(_If(s.cond.subst(env), _rename(s.then, env, tile_map, mem_map, prefix),
                           _rename(s.orelse, env, tile_map, mem_map, prefix)))
        else:
            n = copy.copy(s)
            n.dst = tile_map.get(s.dst, s.dst)
            n.srcs = [tile_map.get(x, x) for x in s.srcs]
            if s.offsets is not None:
                n.offsets = [o.subst(env) for o in s.offsets]
            if s.valid is not None:
                n.valid = [v.subst(env) for v in s.valid]
            if s.memref is not None:
                m, offs = mem_map[s.memref]
                n.memref = m
                if offs is not None:
                    n.offsets = [X.add(o, d) for o, d in zip(n.offsets, offs)]
            out.append(n)
    return out


def _instr_text(s: _Instr, tiles) -> str:
    def typ(name):
        return _tile_type(tiles[name])

    valid = f" valid [{', '.join(v.text() for v in s.valid)}]" if s.valid else ""
    offs = ", ".join(o.text() for o in (s.offsets or []))
    if s.mnemonic == "tload":
        return f"%{s.dst} = tload %{s.memref}[{offs}]{valid} : {typ(s.dst)}"
    if s.mnemonic == "tstore":
        return f"tstore %{s.srcs[0]}, %{s.memref}[{offs}]{valid}"
    if s.mnemonic == "tfill":
        return f"%{s.dst} = tfill {s.scalar} : {typ(s.dst)}"
    if s.mnemonic == "tgather":
        return f"%{s.dst} = tgather %{s.memref}[{offs}], %{s.srcs[0]} axis={s.axis}{valid} : {typ(s.dst)}"
    if s.mnemonic == "tscatter":
        return f"tscatter %{s.srcs[1]}, %{s.memref}[{offs}], %{s.srcs[0]} axis={s.axis}{valid}"
    if s.mnemonic == "tarange":
        start, step, off = s.arange
        return f"%{s.dst} = tarange {start}, {step}, {off.text()} : {typ(s.dst)}"
    ops = ["%" + x for x in s.srcs]
    if s.scalar is not None:
        ops.insert(max(s.scalar_pos, 0), s.scalar)
    attrs = f" axis={s.axis}" if s.axis is not None else ""
    if s.to:
        attrs += f" to={s.to}"
    if s.l0:
        attrs += f" l0 [{', '.join(str(v) for v in s.l0)}]"
    return f"%{s.dst} = {s.mnemonic} {', '.join(ops)}{attrs}{valid} : {typ(s.dst)}"


def _stmts(lines, body, indent, tiles, call_text):
    pad = "  " * indent
    for s in body:
        if isinstance(s, _Loop):
            extra = ""
            if s.range:
                mx, mn, levels = s.range
                extra = f" max_range={mx} min_range={mn}"
                if levels:
                    extra += " tile_levels={" + ",".join(f"{k}:{levels[k]}" for k in sorted(levels, reverse=True)) + "}"
            if s.parallel:
                extra += f" parallel dim={s.parallel[0]} tile={s.parallel[1]}"
            lines.append(f"{pad}FOR %{s.var}:idx, {s.start.text()}:idx, {s.stop.text()}:idx, {s.step.text()}:idx{extra}")
            _stmts(lines, s.body, indent + 1, tiles, call_text)
            lines.append(f"{pad}ENDFOR")
        elif isinstance(s, _If):
            lines.append(f"{pad}IF {s.cond.text()}")
            _stmts(lines, s.then, indent + 1, tiles, call_text)
            if s.orelse:
                lines.append(f"{pad}ELSE")
                _stmts(lines, s.orelse, indent + 1, tiles, call_text)
            lines.append(f"{pad}ENDIF")
        elif isinstance(s, _Call):
            lines.append(pad + call_text(s))
        else:
            lines.append(pad + _instr_text(s, tiles))


def module_text(module: PTOModule, entry: str) -> str:
    if entry not in module.functions:
        raise UserError(f"PTOModule '{module.name}': entry @{entry} is not a function of the module "
                        f"(functions: {', '.join(module.functions) or 'none'})")
    fn = module.functions[entry]
    if fn.in_core:
        fn = _wrap_incore(module, fn)
    incore: dict[str, _InCore] = {}

    def get_incore(name, where):
        if name not in incore:
            callee = module.functions.get(name)
            if callee is None:
                raise UserError(f"@{fn.name}: CALL @{name} names no function of module '{module.name}' ({where})")
            incore[name] = _InCore(callee, module, ())
        return incore[name]

    memrefs = dict(fn.memrefs)
    shapes = {}
    shape_scalars = []
    for m in memrefs.values():
        if m.shape is None:
            dims = [X.var(f"{m.name}_d{d}") for d in range(2)]
            shape_scalars += [d.a for d in dims]
            shapes[m.name] = dims
        else:
            shapes[m.name] = m.shape
    body = _inline_orchestration(fn.body, module, {}, {}, (fn.name,))

    def call_text(c: _Call) -> str:
        f = get_incore(c.callee, c.where)
        parts = []
        for pname, block in f.blocks.items():
            if pname not in c.args:
                raise UserError(f"@{fn.name}: CALL @{c.callee} misses parameter '{pname}' ({c.where})")
            m, offs, exts, units = c.args[pname]
            if m not in memrefs:
                raise UserError(f"@{fn.name}: CALL @{c.callee}: '{m}' is not a memref of @{fn.name} ({c.where})")
            if offs is None:
                offs = [X.const(0)] * len(block)
            elif units:
                if len(offs) != len(block):
                    raise UserError(f"@{fn.name}: CALL @{c.callee}: parameter '{pname}' is {len(block)}-D; "
                                    f"(tensor, row, col) offsets need 2-D")
                offs = [X.mul(o, b.a) if b.op == "const" else E("*", o, b) for o, b in zip(offs, block)]
            exts = block if exts is None else exts
            parts.append(f"%{pname} -> %{m}[{', '.join(o.text() for o in offs)}; {', '.join(e.text() for e in exts)}]")
        for extra in sorted(set(c.args) - set(f.blocks)):
            raise UserError(f"@{fn.name}: CALL @{c.callee} has no parameter '{extra}' ({c.where})")
        for sname in f.scalars:
            if sname not in c.scalars:
                raise UserError(f"@{fn.name}: CALL @{c.callee} misses scalar '{sname}' ({c.where})")
            parts.append(f"%{sname} -> {c.scalars[sname].text()}")
        return f"CALL @{c.callee}({', '.join(parts)})"

    orch = []
    _stmts(orch, body, 1, {}, call_text)
    # Variants <f>_<rows> of called functions, which tile_levels may pick.
    for name in list(incore):
        for other in module.functions.values():
            suffix = other.name[len(name) + 1:]
            if other.in_core and other.name.startswith(name + "_") and suffix.isdigit():
                get_incore(other.name, "tile_levels")
    params = [f"%{m.name}: {_memref_type(m, shapes[m.name])}{' out' if m.out else ''}"
              for m in memrefs.values() if m.kind == "param"]
    head = [f"module @{module.name} entry @{fn.name}", ""]
    out = "\n".join(head) + "\n"
    for f in incore.values():
        out += f.text() + "\n"
    lines = [f"orchestration func @{fn.name}({', '.join(params)}) {{"]
    for s, dt in fn.scalars.items():
        lines.append(f"  %{s} = alloc_scalar : {dt}")
    for s in shape_scalars:
        lines.append(f"  %{s} = alloc_scalar : i64")
    for m in memrefs.values():
        if m.kind == "workspace":
            lines.append(f"  %{m.name} = alloc_workspace : {_memref_type(m, m.shape)}")
    for m in memrefs.values():
        if m.kind == "view":
            _, base, offs, dims, steps = m.view
            lines.append(f"  %{m.name} = view %{base}[{', '.join(o.text() for o in offs)}] dims "
                         f"[{', '.join(map(str, dims))}] steps [{', '.join(map(str, steps))}] : "
                         f"{_memref_type(m, m.shape)}")
        elif m.kind == "reshape":
            lines.append(f"  %{m.name} = reshape %{m.view[1]} : {_memref_type(m, m.shape)}")
    lines += orch
    lines += ["  return", "}"]
    return out + "\n".join(lines) + "\n"


def _inline_orchestration(body, module, mem_env, scalar_env, stack):
    out = []
    for s in body:
        if isinstance(s, _Loop):
            n = copy.copy(s)
            n.start, n.stop, n.step = (x.subst(scalar_env) for x in (s.start, s.stop, s.step))
            n.body = _inline_orchestration(s.body, module, mem_env, scalar_env, stack)
            out.append(n)
        elif isinstance(s, _If):
            out.append(_If(s.cond.subst(scalar_env), _inline_orchestration(s.then, module, mem_env, scalar_env, stack),
                           _inline_orchestration(s.orelse, module, mem_env, scalar_env, stack)))
        elif isinstance(s, _Call):
            args = {}
            for p, (m, offs, exts, units) in s.args.items():
                args[p] = (mem_env.get(m, m), None if offs is None else [o.subst(scalar_env) for o in offs],
                           None if exts is None else [e.subst(scalar_env) for e in exts], units)
            c = _Call(s.callee, args, {k: v.subst(scalar_env) for k, v in s.scalars.items()}, s.where)
            callee = module.functions.get(c.callee)
            if callee is not None and not callee.in_core:
                if callee.name in stack:
                    raise UserError(f"recursive CALL @{c.callee} ({c.where})")
                menv = {}
                for p, m in callee.memrefs.items():
                    if p not in c.args:
                        raise UserError(f"CALL @{c.callee} misses memref '{p}' ({c.where})")
                    if c.args[p][1] is not None:
                        raise UserError(f"CALL @{c.callee}: orchestration functions take whole tensors; "
                                        f"'{p}' has offsets ({c.where})")
                    menv[p] = c.args[p][0]
                senv = {}
                for p in callee.scalars:
                    if p not in c.scalars:
                        raise UserError(f"CALL @{c.callee} misses scalar '{p}' ({c.where})")
                    senv[p] = c.scalars[p]
                out.extend(_inline_orchestration(callee.body, module, menv, senv, stack + (callee.name,)))
            else:
                out.append(c)
        else:
            raise UserError("tile instruction in an orchestration function")
    return out


def _wrap_incore(module: PTOModule, fn: PTOFunction) -> PTOFunction:
    """An orchestration that calls InCore function `fn` once on whole tensors."""
    from pypto.pto.builder import PTOFunctionBuilder

    inner = _InCore(fn, module, ())
    b = PTOFunctionBuilder(f"{fn.name}_entry").not_in_core()
    for name, block in inner.blocks.items():
        b.memref(name, dtype=fn.memrefs[name].dtype, shape=block)
    for s in inner.scalars:
        b.scalar(s, fn.scalars[s])
    b.call(fn.name, {**{n: n for n in inner.blocks}, **{s: s for s in inner.scalars}})
    return b.build()
