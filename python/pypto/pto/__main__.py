"""python -m pypto.pto: tools for .pto files.

  parse FILE_OR_DIR [-o DIR]   write PTOFunctionBuilder Python for each .pto file
  compile FILE.pto             check a file and print each InCore function's buffer bytes
"""

from __future__ import annotations

import argparse
import os
import sys

from pypto.errors import PtoSyntaxError


def _pto_files(path: str) -> list[str]:
    if os.path.isdir(path):
        return sorted(os.path.join(path, f) for f in os.listdir(path) if f.endswith(".pto"))
    return [path]


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
            with open(path, encoding="utf-8") as f:
                text = f.read()
            code = builder_code(text, os.path.basename(path))
        except PtoSyntaxError as e:
            print(f"{path}:{e.line}:{e.column}: {e}", file=sys.stderr)
            status = 1
            continue
        out_dir = args.output or os.path.dirname(path) or "."
        os.makedirs(out_dir, exist_ok=True)
        out = os.path.join(out_dir, os.path.splitext(os.path.basename(path))[0] + "_builder.py")
        with open(out, "w", encoding="utf-8") as f:
            f.write(code)
        n_incore = code.count(".in_core()")
        print(f"Functions: {n_incore + 1}\n  InCore: {n_incore}\n  Orchestration: 1\nGenerated: {out}")
    return status


def _compile(args) -> int:
    import pypto.pto

    try:
        with open(args.file, encoding="utf-8") as f:
            text = f.read()
        program = pypto.pto.compile(text)
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
    return _parse(args) if args.cmd == "parse" else _compile(args)


if __name__ == "__main__":
    sys.exit(main())
