"""Where the instructions of one callgrind profile grow over another's: each function's own count (callgrind_annotate)
subtracted, then summed by library (the interpreter split by source file family), biggest first; then the
functions that grew most.

    python benchmarks/callgrind_by_library.py add-1k.out add-10k.out
"""

from __future__ import annotations

import re
import subprocess
import sys

_LINE = re.compile(r"\s*([\d,]+)\s+(\S.*)$")


def own_counts(profile: str) -> dict[str, int]:
    """Each function's own instructions (``file:function [library]``), from callgrind_annotate."""
    out = subprocess.run(["callgrind_annotate", "--threshold=100", "--show-percs=no", profile], capture_output=True,
                         text=True, check=True).stdout
    counts: dict[str, int] = {}
    for line in out.splitlines():
        m = _LINE.match(line)
        if m and "PROGRAM TOTALS" not in line and ":" in m[2]:
            counts[m[2]] = counts.get(m[2], 0) + int(m[1].replace(",", ""))
    return counts


def category(function: str) -> str:
    """The library of a function, the interpreter's by what its source file does."""
    found = re.search(r"\[([^\]]*)\]\s*$", function)
    library = found[1].split("/")[-1] if found else "(no library named)"
    if "arrow" in library or "parquet" in library:
        return "pyarrow (Parquet decoding, compute kernels)"
    if "libpython" in library:
        source = function.split(":")[0].split("/")[-1]
        if source == "ceval.c":
            return "python: bytecode"
        if source in ("dictobject.c", "setobject.c"):
            return "python: dicts and sets"
        if source.startswith(("unicode", "bytes")):
            return "python: strings"
        return "python: gc" if source == "gcmodule.c" else "python: other (objects made and freed, hashing, ...)"
    if "libc.so" in library:
        return "libc (copies, allocations)"
    return library


def main() -> int:
    small, big = own_counts(sys.argv[1]), own_counts(sys.argv[2])
    grown: dict[str, int] = {}
    for function in small.keys() | big.keys():
        kind = category(function)
        grown[kind] = grown.get(kind, 0) + big.get(function, 0) - small.get(function, 0)
    total = sum(grown.values())
    ranked = sorted(grown.items(), key=lambda item: -item[1])
    for kind, n in ranked[:TOP]:
        print(f"{n / 1e6:9.1f} M {100 * n / total:5.1f} %  {kind}")
    print(f"{sum(n for _, n in ranked[TOP:]) / 1e6:9.1f} M          the rest")
    print(f"{total / 1e6:9.1f} M in all; the functions that grew most:")
    by_function = sorted(((big.get(f, 0) - small.get(f, 0), f) for f in small.keys() | big.keys()), reverse=True)
    for n, function in by_function[:TOP]:
        print(f"{n / 1e6:9.1f} M {100 * n / total:5.1f} %  {function[:100]}")
    return 0


TOP = 10
"""Categories and functions printed."""


if __name__ == "__main__":
    raise SystemExit(main())
