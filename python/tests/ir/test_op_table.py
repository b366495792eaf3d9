"""The op table (csrc/ir/ops.def) agrees with everything it drives: the
.pto parser's instructions, the tile functors of the generated code, the
pypto namespace and pypto.Tensor's methods, and the reference page
docs/ops.md generated from it."""

import inspect
import pathlib
import re

import numpy as np
import pytest

import pypto
from pypto import _C, _op_table, ops, ops_doc, shape_ops

ROOT = pathlib.Path(__file__).resolve().parents[3]
OPS_MD = ROOT / "docs" / "ops.md"
TILE_OPS = ROOT / "csrc" / "codegen" / "tile_ops"  # the parts of tile_ops.h

MNEMONICS = {r["name"] for r in _op_table.opcodes()}


def _pto_of(fn) -> str:
    args = [np.zeros((8, 16), np.float32) for _ in inspect.signature(fn).parameters]
    return pypto.compile(pypto.jit(fn), *args).pto()


def _unary_fn(x: pypto.Tensor((8, 16), pypto.DT_FP32)):
    pypto.set_vec_tile_shapes(8, 16)
    return pypto.exp(x)


def _binary_fn(x: pypto.Tensor((8, 16), pypto.DT_FP32), y: pypto.Tensor((8, 16), pypto.DT_FP32)):
    pypto.set_vec_tile_shapes(8, 16)
    return pypto.sub(x, y)


def test_the_docs_page_is_generated_from_the_table():
    assert OPS_MD.read_text(encoding="utf-8") == _op_table.markdown(), (
        "docs/ops.md is stale: regenerate it with `python -m pypto.ops_doc docs/ops.md`")


def test_the_check_mode_of_the_generator_reports_a_stale_page(tmp_path):
    page = tmp_path / "ops.md"
    page.write_text(_op_table.markdown() + "an edit by hand\n", encoding="utf-8")
    assert ops_doc.main(["--check", str(page)]) == 1
    assert ops_doc.main([str(page)]) == 0
    assert ops_doc.main(["--check", str(page)]) == 0


def test_mnemonics_are_unique_and_every_opcode_is_on_the_docs_page():
    names = [r["name"] for r in _op_table.opcodes()]
    assert len(names) == len(set(names))
    page = OPS_MD.read_text(encoding="utf-8")
    for n in names:
        assert f"| `{n}` |" in page, n


def test_the_parser_reads_every_opcode_of_the_table():
    unary = _pto_of(_unary_fn)
    binary = _pto_of(_binary_fn)
    assert " texp " in unary and " tsub " in binary
    for r in _op_table.opcodes():
        if r["form"] == "unary":
            text = unary.replace(" texp ", f" {r['name']} ")
            assert f" {r['name']} " in _C.parse_pto_roundtrip(text)
        elif r["form"] == "binary":
            text = binary.replace(" tsub ", f" {r['name']} ")
            assert f" {r['name']} " in _C.parse_pto_roundtrip(text)
        else:
            # Another form of operands: the parser may reject the line, but never as an unknown instruction.
            try:
                _C.parse_pto_roundtrip(unary.replace(" texp ", f" {r['name']} "))
            except pypto.PtoSyntaxError as e:
                assert "unknown instruction" not in str(e), (r["name"], str(e))


def test_a_mnemonic_the_table_lacks_is_an_unknown_instruction():
    with pytest.raises(pypto.PtoSyntaxError, match="unknown instruction 'tnosuchop'"):
        _C.parse_pto_roundtrip(_pto_of(_unary_fn).replace(" texp ", " tnosuchop "))


def test_every_functor_the_table_names_is_defined_in_the_tile_library():
    header = "".join(p.read_text(encoding="utf-8") for p in sorted(TILE_OPS.glob("*.h")))
    assert "struct OpAdd" in header
    for r in _op_table.opcodes():
        if r["functor"]:
            assert re.search(rf"\bstruct {r['functor']}\b", header), r
        if r["form"] in ("unary", "binary", "row reduce", "column reduce", "axis reduce", "row expand",
                         "column expand"):
            assert r["functor"], f"{r['name']} ({r['form']}) needs a functor"


def test_reduction_and_expand_forms_name_a_binary_opcode_with_the_same_functor():
    by_name = {r["name"]: r for r in _op_table.opcodes()}
    for r in _op_table.opcodes():
        if r["form"] in ("row reduce", "column reduce", "axis reduce", "row expand", "column expand"):
            base = by_name[r["base"]]
            assert base["form"] == "binary" and base["functor"] == r["functor"], r
        if r["form"].endswith("reduce"):
            assert by_name[r["base"]]["identity"], f"{r['base']} combines {r['name']} but has no start value"


def test_tensor_ops_name_the_opcodes_they_lower_to():
    for r in _op_table.tensor_ops():
        emits = r["emits"].split()
        assert set(emits) <= MNEMONICS, (r["name"], set(emits) - MNEMONICS)
        if r["opcode"] is not None:
            assert r["opcode"] in emits, r
        if r["class"] in ("unary", "binary", "where", "reduce"):
            assert r["opcode"] is not None, f"{r['name']}: an elementwise op or reduction needs its opcode"


def test_every_public_row_is_a_pypto_function_with_the_rows_description():
    for name, r in _op_table.public_rows().items():
        fn = getattr(pypto, name, None)
        assert callable(fn), f"pypto.{name} is in the op table but not in the namespace"
        assert name in pypto.__all__, name
        if fn.__name__ == name:  # clamp is clip under another name
            assert fn.__doc__ == r["doc"], name


def test_the_signatures_of_the_table_are_the_functions_signatures():
    for name, r in _op_table.public_rows().items():
        sig = str(inspect.signature(getattr(pypto, name))).split(" -> ")[0]
        sig = sig.replace(": pypto._dtypes.DataType | None", "").replace(": pypto._dtypes.DataType", "")
        sig = re.sub(r": '?[A-Za-z_.]+(\[[^\]]*\])?( \| None)?'?", "", sig)
        sig = re.sub(r"=<DataType\.(\w+): \d+>", r"=\1", sig)
        sig = sig.replace(" = ", "=").replace('"', "'")
        assert sig == r["signature"], (name, sig, r["signature"])


def test_every_op_function_of_pypto_has_a_row():
    rows = _op_table.public_rows()
    for name in pypto.__all__:
        obj = getattr(pypto, name)
        if inspect.isfunction(obj) and obj.__module__ in (ops.__name__, shape_ops.__name__):
            assert obj.__name__ in rows, f"pypto.{name} has no op table row"


def test_methods_follow_the_table():
    for name, r in _op_table.public_rows().items():
        if r["method"]:
            assert hasattr(pypto.Tensor, name), f"pypto.Tensor.{name} is missing"


def test_composites_trace_into_table_ops():
    # Public rows, or internal tensor ops (no Python function of their own, as `random`).
    rows = set(_op_table.public_rows()) | {r["name"] for r in _op_table.tensor_ops()}
    for r in _op_table.composites():
        for part in r["expands"].split():
            assert part in rows, (r["name"], part)


def test_an_op_without_a_row_is_an_unknown_op():
    with pytest.raises(pypto.UserError, match="unknown op 'nosuchop'"):

        @pypto.jit
        def f(x: pypto.Tensor((4, 4), pypto.DT_FP32)):
            pypto.set_vec_tile_shapes(4, 4)
            return pypto.ops._unary("nosuchop", x)

        f(__import__("numpy").zeros((4, 4), "float32"))
