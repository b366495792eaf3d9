"""python -m pypto.pto: tools for .pto files.

  parse FILE_OR_DIR [-o DIR]   write PTOFunctionBuilder Python for each .pto file
  compile FILE.pto             check a file and print each InCore function's buffer bytes
"""

from __future__ import annotations

import argparse
import os
import sys

from pypto.errors import PtoSyntaxError


class _CliError(Exception):
    """A one-line message for the command line (no traceback)."""


def _pto_files(path: str) -> list[str]:
    if os.path.isdir(path):
        try:
            return sorted(os.path.join(path, f) for f in os.listdir(path) if f.endswith(".pto"))
        except OSError as e:
            raise _CliError(f"{path}: cannot list the directory: {e.strerror}") from None
    return [path]


def _read_text(path: str) -> str:
    """The .pto text of `path`, or a _CliError saying why it cannot be read."""
    if os.path.isdir(path):
        raise _CliError(f"{path}: is a directory, not a .pto file")
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except UnicodeDecodeError as e:
        raise _CliError(f"{path}: not UTF-8 text (byte 0x{e.object[e.start]:02x} at offset {e.start})") from None
    except OSError as e:
        raise _CliError(f"{path}: cannot read the file: {e.strerror}") from None


def _write_text(path: str, text: str) -> None:
    try:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        raise _CliError(f"{path}: cannot write the file: {e.strerror}") from None


def _parse(args) -> int:
    from pypto.pto._gen import builder_code

    files = _pto_files(args.path)
    if not files:
        print(f"no .pto files in {args.path}", file=sys.stderr)
        return 1
    print(f"Found {len(files)} .pto file(s) in {args.path}")
    status = 0
    for path in files:
        print(f"Processing: {os.path.basename(path)}")
        try:
            code = builder_code(_read_text(path), os.path.basename(path))
        except PtoSyntaxError as e:
            print(f"{path}:{e.line}:{e.column}: {e}", file=sys.stderr)
            status = 1
            continue
        except _CliError as e:
            print(e, file=sys.stderr)
            status = 1
            continue
        out_dir = args.output or os.path.dirname(path) or "."
        out = os.path.join(out_dir, os.path.splitext(os.path.basename(path))[0] + "_builder.py")
        _write_text(out, code)
        n_incore = code.count(".in_core()")
        print(f"Functions: {n_incore + 1}\n  InCore: {n_incore}\n  Orchestration: 1\nGenerated: {out}")
    return status


def _compile(args) -> int:
    import pypto.pto

    try:
        program = pypto.pto.compile(_read_text(args.file))
    except PtoSyntaxError as e:
        print(f"{args.file}:{e.line}:{e.column}: {e}", file=sys.stderr)
        return 1
    except (ValueError, TypeError, RuntimeError, NotImplementedError) as e:
        print(f"{args.file}: {e}", file=sys.stderr)
        return 1
    stats = program.stats()
    print(f"{args.file}: OK, entry @{program.name}({', '.join(program.parameters)})")
    print("InCore buffer usage:")
    for name, nbytes in stats["buffer_bytes"].items():
        print(f"  @{name}: {nbytes} bytes ({nbytes / 1024:.1f} KB)")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m pypto.pto", description="Tools for .pto files.")
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("parse", help="write PTOFunctionBuilder Python for .pto files")
    a.add_argument("path", help="a .pto file or a directory of them")
    a.add_argument("-o", "--output", help="directory for the generated files (default: beside each file)")
    c = sub.add_parser("compile", help="check a .pto file and print its InCore buffer usage")
    c.add_argument("file")
    args = p.parse_args(argv)
    try:
        return _parse(args) if args.cmd == "parse" else _compile(args)
    except _CliError as e:
        print(e, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
