"""python -m pypto.pto: bad inputs and outputs are one line on stderr and a non-zero exit, never a
traceback."""

import subprocess
import sys

import numpy as np
import pytest

import pypto


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "pypto.pto", *map(str, args)], capture_output=True, text=True,
                          timeout=240)


@pytest.fixture(scope="module")
def good_pto(tmp_path_factory):
    @pypto.frontend.jit
    def f(x: pypto.Tensor((8, 16), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 16)
        return pypto.add(x, 1.0)

    path = tmp_path_factory.mktemp("cli") / "f.pto"
    path.write_text(pypto.compile(f, np.ones((8, 16), np.float32)).pto())
    return path


def _one_line_error(r, expected):
    assert r.returncode == 1
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], r.stderr


def test_a_good_file_compiles_and_parses(good_pto, tmp_path):
    r = _cli("compile", good_pto)
    assert r.returncode == 0 and "OK, entry @f(x, out)" in r.stdout
    r = _cli("parse", good_pto, "-o", tmp_path)
    assert r.returncode == 0 and (tmp_path / "f_builder.py").exists()


@pytest.mark.parametrize("cmd", ["compile", "parse"])
def test_a_file_that_is_not_utf8(tmp_path, cmd):
    bad = tmp_path / "bad.pto"
    bad.write_bytes(b"// PTO Module: m\n\xff\xfe\n")
    _one_line_error(_cli(cmd, bad), f"{bad}: not UTF-8 text (byte 0xff at offset 17)")


@pytest.mark.parametrize("cmd", ["compile", "parse"])
def test_a_missing_file(tmp_path, cmd):
    _one_line_error(_cli(cmd, tmp_path / "none.pto"), f"{tmp_path / 'none.pto'}: cannot read the file: No such file")


def test_a_directory_given_to_compile(tmp_path):
    _one_line_error(_cli("compile", tmp_path), f"{tmp_path}: is a directory, not a .pto file")


def test_an_output_directory_that_cannot_be_written(good_pto, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    r = _cli("parse", good_pto, "-o", blocker / "sub")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert f"{blocker / 'sub' / 'f_builder.py'}: cannot write the file: Not a directory" in r.stderr
