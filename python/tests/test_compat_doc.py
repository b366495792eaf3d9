"""docs/pypto_compat.md is what pypto.compat_doc makes from the committed list of upstream's names
and this package; the scanner reads a package's public names from a git repository."""

import json
import subprocess
from pathlib import Path

import pypto
from pypto import compat_doc

ROOT = Path(__file__).resolve().parents[2]


def test_committed_page_is_current():
    names = json.loads((ROOT / "docs" / "pypto_compat_names.json").read_text())
    page = (ROOT / "docs" / "pypto_compat.md").read_text()
    assert compat_doc.render(names) == page, (
        "docs/pypto_compat.md is stale: python -m pypto.compat_doc docs/pypto_compat_names.json docs/pypto_compat.md")
    assert len(names["pypto"]) > 200 and len(names["Tensor"]) > 50


def test_status_follows_what_the_package_has(monkeypatch):
    assert compat_doc.status("pypto", "softmax", {"kind": "function", "params": ["input", "dim="]}) == ("same", "")
    st, note = compat_doc.status("pypto", "softmax", {"kind": "function", "params": ["input", "dim=", "kw:dtype"]})
    assert st == "differs" and note == "no parameter `dtype`"
    st, note = compat_doc.status("pypto", "softmax", {"kind": "function", "params": ["a", "b", "c"]})
    assert st == "differs" and "takes 2 positional arguments, upstream 3" in note
    assert compat_doc.status("pypto", "atomic_add", {"kind": "function", "params": ["src", "offsets", "dst"]}) == (
        "same", "")
    monkeypatch.setattr(compat_doc, "OP_FAMILIES", compat_doc.OP_FAMILIES | {"not_an_op_yet"})
    assert compat_doc.status("pypto", "not_an_op_yet", {"kind": "function"}) == ("missing", compat_doc.ISSUE_21)
    assert compat_doc.status("pypto", "no_such_name", {"kind": "function"}) == ("missing", "missing")
    assert compat_doc.status("pypto", "platform", {"kind": "value"})[0] == "not on a CPU"
    assert compat_doc.status("Tensor", "move", {"kind": "method", "params": ["other"]}) == ("same", "")
    assert hasattr(pypto, "SymbolicScalar")


def test_scan_reads_public_names_through_star_imports(tmp_path):
    def write(path, text):
        p = tmp_path / "work" / path
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)

    write("python/pypto/__init__.py", "from .ops import *\nfrom .tensor import Tensor\nfrom . import frontend\n"
          "alias = Tensor\n_private = 1\n")
    write("python/pypto/ops.py", "__all__ = ['add', 'K']\ndef add(input, other, *, alpha=1): pass\n"
          "def hidden(): pass\nK = 3\n")
    write("python/pypto/tensor.py", "class Tensor:\n    def move(self, other): pass\n    @property\n"
          "    def shape(self): pass\n    def _inner(self): pass\n")
    write("python/pypto/frontend/__init__.py", "def jit(func=None, *, pass_options=None): pass\n")
    work = tmp_path / "work"
    run = lambda *a: subprocess.run(["git", *a], cwd=work, check=True, capture_output=True)  # noqa: E731
    run("init", "-q")
    run("add", "-A")
    run("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "x")
    names = compat_doc.scan(str(work / ".git"))
    assert set(names["pypto"]) == {"add", "K", "Tensor", "alias", "frontend"}
    assert names["pypto"]["add"] == {"kind": "function", "params": ["input", "other", "kw:alpha"]}
    assert names["Tensor"] == {"move": {"kind": "method", "params": ["other"]}, "shape": {"kind": "property",
                                                                                        "params": []}}
    assert names["pypto.frontend"]["jit"]["params"] == ["func=", "kw:pass_options"]
