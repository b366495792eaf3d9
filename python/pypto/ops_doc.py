"""Writes (or, with ``--check``, compares) docs/ops.md, the op reference
generated from the op table: ``python -m pypto.ops_doc docs/ops.md``."""

from __future__ import annotations

import sys

from pypto import _op_table


def main(argv: list[str]) -> int:
    check = "--check" in argv
    paths = [a for a in argv if a != "--check"]
    if len(paths) != 1:
        print("usage: python -m pypto.ops_doc [--check] docs/ops.md", file=sys.stderr)
        return 2
    text = _op_table.markdown()
    if check:
        with open(paths[0], encoding="utf-8") as f:
            if f.read() != text:
                print(f"{paths[0]} is stale; regenerate it with python -m pypto.ops_doc {paths[0]}",
                      file=sys.stderr)
                return 1
        return 0
    with open(paths[0], "w", encoding="utf-8") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
