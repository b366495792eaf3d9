"""``docs/pypto_compat.md``: every public name of upstream PyPTO's Python package, and its status
here. Upstream's package cannot be imported on a CPU (it loads NPU libraries, and its PyPI name is
also ``pypto``), so its names are read from the source of a copy of its repository and kept in
``docs/pypto_compat_names.json``; the page is made from that list and an introspection of this
package, and a test checks that the committed page is what this module makes.

    python -m pypto.compat_doc --scan GIT_DIR docs/pypto_compat_names.json   # re-read upstream
    python -m pypto.compat_doc docs/pypto_compat_names.json docs/pypto_compat.md
"""

from __future__ import annotations

import ast
import inspect
import json
import subprocess
import sys
from typing import Any

# ---------------------------------------------------------------------------- reading upstream


def _show(git_dir: str, path: str) -> str | None:
    r = subprocess.run(["git", f"--git-dir={git_dir}", "show", f"HEAD:{path}"], capture_output=True, text=True)
    return r.stdout if r.returncode == 0 else None


def _module_source(git_dir: str, module: str) -> tuple[str, str] | None:
    """(path, source) of ``pypto.<module>`` (a file or a package) in the repository."""
    base = "python/pypto/" + module.replace(".", "/") if module else "python/pypto"
    for path in (base + ".py", base + "/__init__.py"):
        src = _show(git_dir, path)
        if src is not None:
            return path, src
    return None


def _params(fn: ast.FunctionDef) -> list[str]:
    """Parameters as ``name`` (positional, required), ``name=`` (positional with a default),
    ``*name``, ``kw:name`` (keyword-only) and ``**name``."""
    a = fn.args
    positional = a.posonlyargs + a.args
    first_default = len(positional) - len(a.defaults)
    names = [x.arg + ("=" if i >= first_default else "") for i, x in enumerate(positional)]
    if a.vararg:
        names.append("*" + a.vararg.arg)
    names += ["kw:" + x.arg for x in a.kwonlyargs]
    if a.kwarg:
        names.append("**" + a.kwarg.arg)
    return [n for n in names if n.rstrip("=") not in ("self", "cls")]


def _literal_all(tree: ast.Module) -> list[str] | None:
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                try:
                    return list(ast.literal_eval(node.value))
                except ValueError:
                    return None
    return None


def _scan_module(git_dir: str, module: str, memo: dict) -> dict[str, dict]:
    """Public names ``from pypto.<module> import *`` gives, with a kind and parameters (``memo``
    holds modules read, and {} for one being read, which breaks import cycles)."""
    if module not in memo:
        memo[module] = {}
        memo[module] = _read_module(git_dir, module, memo)
    return memo[module]


def _read_module(git_dir: str, module: str, memo: dict) -> dict[str, dict]:
    found = _module_source(git_dir, module)
    if found is None:
        return {}
    path, src = found
    tree = ast.parse(src)
    package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
    names: dict[str, dict] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names[node.name] = {"kind": "function", "params": _params(node)}
        elif isinstance(node, ast.ClassDef):
            names[node.name] = {"kind": "class"}
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    names[t.id] = {"kind": "value"}
        elif isinstance(node, ast.ImportFrom) and node.level >= 1:
            parts = package.split(".") if package else []
            parts = parts[:len(parts) - (node.level - 1)] if node.level > 1 else parts
            sub = ".".join(p for p in parts + ([node.module] if node.module else []) if p)
            for alias in node.names:
                if alias.name == "*":
                    names.update(_scan_module(git_dir, sub, memo))
                else:
                    inner = _scan_module(git_dir, sub, memo).get(alias.name, {"kind": "value"})
                    names[alias.asname or alias.name] = inner
    exported = _literal_all(tree)
    if exported is not None:
        return {n: names.get(n, {"kind": "value"}) for n in exported}
    return {n: v for n, v in names.items() if not n.startswith("_")}


def _tensor_methods(git_dir: str) -> dict[str, dict]:
    src = _show(git_dir, "python/pypto/tensor.py") or ""
    out: dict[str, dict] = {}
    for node in ast.parse(src).body:
        if isinstance(node, ast.ClassDef) and node.name == "Tensor":
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and not item.name.startswith("_"):
                    prop = any(isinstance(d, ast.Name) and d.id == "property" for d in item.decorator_list)
                    out[item.name] = {"kind": "property" if prop else "method", "params": _params(item)}
    return out


def scan(git_dir: str) -> dict[str, Any]:
    """Upstream's public names: module level (``pypto.X``), ``pypto.Tensor`` methods and
    ``pypto.frontend`` names."""
    commit = subprocess.run(["git", f"--git-dir={git_dir}", "rev-parse", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    memo: dict = {}
    top = _scan_module(git_dir, "", memo)
    top = {n: v for n, v in top.items() if not n.startswith("_") and n not in ("torch", "pypto_impl")}
    frontend = _scan_module(git_dir, "frontend", memo)
    return {"commit": commit, "pypto": dict(sorted(top.items())), "Tensor": dict(sorted(_tensor_methods(git_dir).items())),
            "pypto.frontend": dict(sorted(frontend.items()))}


# ---------------------------------------------------------------------------- the page

# Why a name is absent or different here; a name without a note that is absent reads "missing".
NOT_ON_CPU = "not meaningful on a CPU"
ISSUE_21 = "missing: an op of the op families issue"
LOGICAL = ("differs: takes or returns a pypto LogicalTensor (the traced graph value a Tensor names), not a C++ "
           "tensor object")
NOTES: dict[str, str] = {
    # device, runtime and toolchain facilities of the NPU
    "platform": f"{NOT_ON_CPU}: describes the NPU (SoC version, core counts)",
    "cost_model": f"{NOT_ON_CPU}: the NPU cost model; RunMode.SIM writes the real run's swimlane instead",
    "set_cost_model": f"{NOT_ON_CPU}: the NPU cost model",
    "CachePolicy": f"{NOT_ON_CPU}: NPU cache hints",
    "set_cache_policy": f"{NOT_ON_CPU}: NPU cache hints",
    "get_cache_policy": f"{NOT_ON_CPU}: NPU cache hints",
    "distributed": f"{NOT_ON_CPU}: collective communication between NPUs",
}
OP_FAMILIES = set("""fmod remainder floor_div ceil_div gcd bitwise_and bitwise_or bitwise_xor bitwise_not
bitwise_left_shift bitwise_right_shift logical_and logical_or lrelu prelu axpy_ cumsum cumprod tril triu tril_
triu_ argmax argmin topk argsort sort32 mrgsort greater index_select gathermask scatter_ scatter_update
index_add index_add_ index_put_ one_hot gather_in_l1 gather_in_ub pad fillpad interleave deinterleave pack
unpack uniform normal quantize dequantize quant_mx scaled_mm conv atomic_add""".split())


def _ours(group: str, name: str):
    import pypto

    if group == "pypto":
        return getattr(pypto, name, None), hasattr(pypto, name)
    if group == "Tensor":
        return getattr(pypto.Tensor, name, None), hasattr(pypto.Tensor, name)
    return getattr(pypto.frontend, name, None), hasattr(pypto.frontend, name)


def _differences(theirs: list[str], obj) -> list[str] | None:
    """What a call written for upstream's parameters cannot pass to ``obj``: too many required
    positional arguments, or a parameter with a default (or keyword-only) that ``obj`` does not
    name. None when ``obj`` has no signature."""
    if isinstance(obj, property):
        return None
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return None
    ps = [p for p in sig.parameters.values() if p.name not in ("self", "cls")]
    var_pos = any(p.kind == p.VAR_POSITIONAL for p in ps)
    var_kw = any(p.kind == p.VAR_KEYWORD for p in ps)
    positional = [p for p in ps if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    named = {p.name for p in ps if p.kind != p.VAR_POSITIONAL and p.kind != p.VAR_KEYWORD}
    out = []
    required = [t for t in theirs if not t.startswith(("*", "kw:")) and not t.endswith("=")]
    if len(required) > len(positional) and not var_pos:
        out.append(f"takes {len(positional)} positional arguments, upstream {len(required)}")
    for t in theirs:
        if t.endswith("=") or t.startswith("kw:"):
            name = t[3:] if t.startswith("kw:") else t[:-1]
            if name not in named and not var_kw:
                out.append(f"no parameter `{name}`")
    return out


# Names whose upstream source and API reference disagree; pypto follows the reference.
FOLLOWS_REFERENCE: dict[tuple[str, str], str] = {
    ("Tensor", "where"): "differs: as upstream's API reference, where(self, condition, y) (self where condition holds, "
                         "else y); upstream's source declares (condition, x, y) and passes four arguments to the "
                         "three-parameter pypto.where, so no call of it runs there",
    ("pypto", "DT_HF4"): "differs: the name exists, but a tensor of it raises NotSupportedError: PyPTO defines no "
                         "HiFloat4 encoding (its own interpreter has none either)",
}


# Names that exist and behave otherwise than upstream's in a way a signature does not show.
DIFFERS: dict[tuple[str, str], str] = {
    ("pypto", "op_wrapper"): "differs: the wrapped function receives and returns pypto.Tensors (upstream hands it "
                             "its C++ tensor objects); errors raised inside name the caller's line, as upstream",
    ("pypto", "Function"): "differs: the common class of the objects get_last_function returns (a completed "
                           "pypto.function block, a jitted function's Compiled); it is not constructed from a C++ "
                           "function object",
    ("pypto.frontend", "parser"): "differs: pypto traces a kernel by running its Python, so the module has no AST "
                                  "parser (no parse_stmts); it holds jit, function and error",
    ("Tensor", "base"): LOGICAL, ("Tensor", "from_base"): LOGICAL, ("Tensor", "logical_tensor"): LOGICAL,
    ("Tensor", "from_logical_tensor"): LOGICAL, ("Tensor", "set_logical_tensor"): LOGICAL,
}


def status(group: str, name: str, info: dict) -> tuple[str, str]:
    """(status, note): "same", "differs" or "missing", with what differs or why it is absent."""
    obj, present = _ours(group, name)
    if not present:
        if name in NOTES:
            return ("missing" if NOTES[name].startswith("missing") else "not on a CPU"), NOTES[name]
        return "missing", ISSUE_21 if name in OP_FAMILIES else "missing"
    if (group, name) in FOLLOWS_REFERENCE:
        return "differs", FOLLOWS_REFERENCE[(group, name)]
    if (group, name) in DIFFERS:
        return "differs", DIFFERS[(group, name)]
    theirs = info.get("params")
    if not theirs or not callable(obj):
        return "same", ""
    diff = _differences(theirs, obj)
    if diff:
        return "differs", "; ".join(diff)
    return "same", ""


def render(names: dict[str, Any]) -> str:
    lines = [
        "# PyPTO compatibility: upstream's public names here",
        "",
        "Generated by `python -m pypto.compat_doc` from `docs/pypto_compat_names.json` (upstream PyPTO's",
        f"public names, read from its source at commit {names['commit'][:10]}) and an introspection of this",
        "package; `python/tests/test_compat_doc.py` checks that this page is current. *same*: the name exists",
        "and a call written for upstream's signature can call it (as many positional arguments, every",
        "parameter with a default or keyword-only one by name); *differs*: it exists, and the note says what",
        "such a call cannot pass; *missing*: not here yet; *not on a CPU*: an NPU facility with no meaning here.",
        "",
    ]
    totals: dict[str, int] = {}
    body = []
    for group, title in (("pypto", "Module level: `pypto.X`"), ("Tensor", "`pypto.Tensor` methods and properties"),
                         ("pypto.frontend", "`pypto.frontend`")):
        body += [f"## {title}", "", "| name | upstream kind | status | note |", "| --- | --- | --- | --- |"]
        for name, info in names[group].items():
            st, note = status(group, name, info)
            totals[st] = totals.get(st, 0) + 1
            body.append(f"| `{name}` | {info.get('kind', '')} | {st} | {note} |")
        body.append("")
    total = sum(totals.values())
    lines.append("**Totals:** " + ", ".join(f"{totals.get(k, 0)} {k}" for k in ("same", "differs", "missing",
                                                                              "not on a CPU")) + f" of {total}.")
    lines.append("")
    return "\n".join(lines + body)


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[0] == "--scan":
        with open(argv[2], "w") as f:
            json.dump(scan(argv[1]), f, indent=1, sort_keys=True)
            f.write("\n")
        return 0
    if len(argv) == 2:
        with open(argv[0]) as f:
            names = json.load(f)
        with open(argv[1], "w") as f:
            f.write(render(names))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
