"""Builder Python for a .pto module: the code that rebuilds it with
PTOFunctionBuilder (what `python -m pypto.pto parse` writes)."""

from __future__ import annotations

from pypto import _C

_DT = {"f32": "F32", "f16": "F16", "bf16": "BF16", "f64": "F64", "i8": "I8", "i16": "I16", "i32": "I32", "i64": "I64",
       "u8": "U8", "i1": "BOOL"}


def _dims(dims: list[str]) -> str:
    return "[" + ", ".join(d if d.lstrip("-").isdigit() else repr(d) for d in dims) + "]"


def _dt(name: str) -> str:
    return f"ElementType.{_DT[name]}"


def _strs(v: list[str]) -> str:
    return "[" + ", ".join(repr(x) for x in v) + "]"


def _body(lines: list[str], body: list, depth: int) -> None:
    pad = "    " * depth
    for s in body:
        k = s["kind"]
        if k == "loop":
            extra = ""
            if s["range"] is not None:
                mx, mn, levels = s["range"]
                extra += f", max_range={mx}, min_range={mn}"
                if levels:
                    extra += f", tile_levels={dict(sorted(levels.items(), reverse=True))!r}"
            if s["parallel"] is not None:
                extra += f", parallel={tuple(s['parallel'])!r}"
            lines.append(f"{pad}.for_loop({s['var']!r}, {s['start']!r}, {s['stop']!r}, {s['step']!r}{extra})")
            _body(lines, s["body"], depth + 1)
            lines.append(f"{pad}.end_for()")
        elif k == "if":
            lines.append(f"{pad}.if_then({s['cond']!r})")
            _body(lines, s["then"], depth + 1)
            if s["else"]:
                lines.append(f"{pad}.else_()")
                _body(lines, s["else"], depth + 1)
            lines.append(f"{pad}.end_if()")
        elif k == "call":
            regions = ", ".join(f"{p!r}: ({m!r}, {_strs(o)}, {_strs(e)})" for p, m, o, e in s["args"])
            scalars = ", ".join(f"{p!r}: {v!r}" for p, v in s["scalars"])
            lines.append(f"{pad}.call({s['callee']!r}, {{{scalars}}}, regions={{{regions}}})")
        else:
            lines.append(pad + _instr(s))


def _instr(s: dict) -> str:
    op, dst, srcs = s["op"], s["dst"], s["srcs"]
    valid = f", valid={_strs(s['valid'])}" if s["valid"] else ""
    if op == "tload":
        return f".load({dst!r}, {s['memref']!r}, offsets={_strs(s['offsets'])}{valid})"
    if op == "tstore":
        atomic = ", atomic=True" if s["atomic"] else ""
        return f".store({srcs[0]!r}, {s['memref']!r}, offsets={_strs(s['offsets'])}{valid}{atomic})"
    if op == "tfill":
        return f".fill({dst!r}, {s['scalar']!r})"
    if op == "tgather":
        return f".gather({dst!r}, {s['memref']!r}, {srcs[0]!r}, {s['axis']}, {_strs(s['offsets'])}{valid})"
    if op == "tscatter":
        return f".scatter({srcs[1]!r}, {s['memref']!r}, {srcs[0]!r}, {s['axis']}, {_strs(s['offsets'])}{valid})"
    if op == "tarange":
        off = s["offsets"][0] if s["offsets"] else "0"
        return f".arange({dst!r}, {s['scalar']!r}, {s['step']!r}, {off!r})"
    if op == "trandom":
        key, counter, normal, mantissa, rounds = s["random"]
        off, strides, block0 = s["offsets"][0], list(s["offsets"][1:-1]), s["offsets"][-1]
        extra = (f", block0={block0!r}" if block0 != "0" else "") + (f", rounds={rounds}" if rounds != 10 else "")
        return f".random({dst!r}, {key}, {counter}, {off!r}, {strides!r}, normal={normal}, mantissa={mantissa}{extra})"
    args = "".join(f", {x!r}" for x in srcs)
    kw = ""
    if s["scalar_pos"] >= 0:
        kw += f", scalar={s['scalar']!r}, scalar_pos={s['scalar_pos']}"
    if s["axis"] >= 0:
        kw += f", axis={s['axis']}"
    if s["to"]:
        kw += f", to={_dt(s['to'])}"
    if s["l0"]:
        kw += f", l0={list(s['l0'])}"
    return f".instr({op!r}, {dst!r}{args}{kw}{valid})"


def builder_code(text: str, source: str = "") -> str:
    """Python that rebuilds the module of .pto `text` into `module` (and
    compiles it when run as a script)."""
    from pypto.pto.program import check_text

    data = _C.pto_module_data(check_text(text, "pypto.pto"))
    lines = [
        f'"""PTOFunctionBuilder code for {source or "a .pto module"} (written by python -m pypto.pto parse)."""',
        "",
        "from pypto.pto import ElementType, MemorySpace, PTOFunctionBuilder, PTOModule",
        "",
        f"module = PTOModule({data['module']!r})",
        "",
    ]
    for f in data["functions"]:
        fused = f", fused_ops={f['fused']!r}" if f["fused"] else ""
        lines.append(f"(PTOFunctionBuilder({f['name']!r}, module=module{fused})")
        lines.append("    .in_core()")
        for name, dims, dt, _ in f["params"]:
            lines.append(f"    .memref({name!r}, MemorySpace.GLOBAL, {_dt(dt)}, shape={_dims(dims)})")
        for s in f["scalars"]:
            lines.append(f"    .scalar({s!r}, ElementType.I64)")
        for name, dims, dt in f["locals"]:
            lines.append(f"    .local({name!r}, {_dims(dims)}, {_dt(dt)})")
        for name, shape, dt in f["tiles"]:
            lines.append(f"    .tile({name!r}, 0, dtype={_dt(dt)}, shape={tuple(shape)!r})")
        _body(lines, f["body"], 1)
        lines += ["    .build())", ""]
    o = data["orchestration"]
    lines.append(f"(PTOFunctionBuilder({data['entry']!r}, module=module)")
    lines.append("    .not_in_core()")
    for name, dims, dt in o["params"]:
        lines.append(f"    .memref({name!r}, MemorySpace.GLOBAL, {_dt(dt)}, shape={_dims(dims)})")
    for name, dims, dt in o["outputs"]:
        lines.append(f"    .output({name!r}, MemorySpace.GLOBAL, {_dt(dt)}, shape={_dims(dims)})")
    for name, dt in o["scalars"]:
        lines.append(f"    .scalar({name!r}, {_dt(dt)})")
    for name, dims, dt, uninit in o["workspaces"]:
        lines.append(f"    .workspace({name!r}, {_dims(dims)}, {_dt(dt)}{', uninit=True' if uninit else ''})")
    for name, dims, dt, base, is_reshape, offs, dmap, steps in o["views"]:
        if is_reshape:
            lines.append(f"    .reshape({name!r}, {base!r}, {_dims(dims)}, {_dt(dt)})")
        else:
            lines.append(f"    .view({name!r}, {base!r}, {_dims(dims)}, {_strs(offs)}, {list(dmap)!r}, "
                         f"{list(steps)!r}, {_dt(dt)})")
    _body(lines, o["body"], 1)
    lines += ["    .build())", "", "", 'if __name__ == "__main__":',
              "    import pypto.pto", "",
              f"    print(pypto.pto.compile(module, entry={data['entry']!r}).pto())", ""]
    return "\n".join(lines)
