"""The op table (csrc/ir/ops.def) as Python sees it, and the reference page
docs/ops.md generated from it.

Regenerate the page after changing the table:
``python -m pypto.ops_doc docs/ops.md`` (``--check`` only compares)."""

from __future__ import annotations

import functools

from pypto import _C


@functools.cache
def opcodes() -> tuple[dict, ...]:
    """Every PTO opcode row: name, form, srcs, functor, base, identity, doc."""
    return tuple(_C.opcode_table())


@functools.cache
def tensor_ops() -> tuple[dict, ...]:
    """Every tensor op row: name, class, result, opcode, emits, method, signature, doc."""
    return tuple(_C.op_table())


@functools.cache
def composites() -> tuple[dict, ...]:
    """Every composite op row: name, expands, method, signature, doc."""
    return tuple(_C.composite_table())


@functools.cache
def public_rows() -> dict[str, dict]:
    """The rows of every public op (tensor ops with a Python name, then composites), by name."""
    rows = {r["name"]: r for r in tensor_ops() if r["signature"]}
    rows.update({r["name"]: r for r in composites()})
    return rows


def row(name: str) -> dict:
    """The table row of public op `name`."""
    return public_rows()[name]


_RESULT = {
    "same": "the operands' promoted dtype",
    "float": "floating point (integers and bool give DT_FP32)",
    "bool": "DT_BOOL",
    "wide": "integers and bool give DT_INT64",
    "index": "DT_INT32 (positions along the sorted dim)",
    "integer": "the operands' promoted dtype, an integer or DT_BOOL (floating-point operands raise)",
}


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def markdown() -> str:
    """The text of docs/ops.md."""
    out = [
        "# Op reference",
        "",
        "Generated from the op table `csrc/ir/ops.def` by `python -m pypto.ops_doc docs/ops.md`; "
        "do not edit by hand (a test fails when this page and the table disagree).",
        "",
        "## Tensor ops",
        "",
        "Each is a function `pypto.<name>`, traced inside `@pypto.frontend.jit`. *Lowers to* lists the PTO "
        "instructions its tiles are computed with (loads, stores and conversions aside). *Method*: "
        "`pypto.Tensor` has a method of the same name.",
        "",
        "| op | signature | class | result dtype | lowers to | method | description |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in tensor_ops():
        if not r["signature"]:
            continue
        emits = ", ".join(f"`{m}`" for m in r["emits"].split())
        if not emits:
            emits = "loads and stores only" if r["class"] == "assemble" else "no instruction (an alias)"
        out.append(f"| `{r['name']}` | `{_cell(r['signature'])}` | {r['class']} | {_RESULT[r['result']]} | "
                   f"{emits} | {'yes' if r['method'] else ''} | {_cell(r['doc'])} |")
    out += [
        "",
        "## Composite ops",
        "",
        "Written in Python as compositions of the ops above, so that they fuse with their neighbours.",
        "",
        "| op | signature | traces into | method | description |",
        "| --- | --- | --- | --- | --- |",
    ]
    for r in composites():
        into = ", ".join(f"`{n}`" for n in r["expands"].split())
        out.append(f"| `{r['name']}` | `{_cell(r['signature'])}` | {into} | {'yes' if r['method'] else ''} | "
                   f"{_cell(r['doc'])} |")
    out += [
        "",
        "## Ops made by passes",
        "",
        "| op | lowers to | description |",
        "| --- | --- | --- |",
    ]
    for r in tensor_ops():
        if r["signature"]:
            continue
        emits = ", ".join(f"`{m}`" for m in r["emits"].split())
        out.append(f"| `{r['name']}` | {emits} | {_cell(r['doc'])} |")
    out += [
        "",
        "## PTO instructions",
        "",
        "The tile instructions of `.pto` text (see `docs/pto.md` for the syntax). *Functor* is the per-element "
        "function of `csrc/codegen/tile_ops/elementwise.h` the generated kernel applies; *applies* names the binary "
        "instruction a reduction or broadcast form applies, and *start* the value a reduction combining with "
        "it starts from. Every instruction with two sources also has a form with a constant operand, written "
        "with a trailing `s` (`tadds`).",
        "",
        "| instruction | form | sources | functor | applies | start | description |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in opcodes():
        applies = f"`{r['base']}`" if r["base"] != r["name"] else ""
        functor = f"`pto::{r['functor']}`" if r["functor"] else ""
        out.append(f"| `{r['name']}` | {r['form']} | {r['srcs']} | {functor} | {applies} | {r['identity']} | "
                   f"{_cell(r['doc'])} |")
    return "\n".join(out) + "\n"
