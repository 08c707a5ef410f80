"""One ``reportgen build`` that adds the store's new runs to an existing site, in this process, drawing only their
pages: the renderer version is held to the one the site's manifest names, so code changed since the site was
built (a profiler's build of another commit) does not redraw every page. For profiling what an add does, e.g.

    valgrind --tool=callgrind --callgrind-out-file=add-10k.out .venv/bin/python benchmarks/pinned_add.py STORE SITE

with a copy of the store (one run added since SITE was built) and of the site, since the build changes both.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import reportgen.site.plan as plan
from reportgen.site.build import build_site


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("store", type=Path)
    parser.add_argument("site", type=Path)
    parser.add_argument("--keep-traces", type=int, default=20)
    args = parser.parse_args()
    text = (args.site / "manifest.json").read_text()
    found = re.search(r'"renderer_version": (?:\[\n)?"([^"]*)"', text)  # version 3 (a column) or 2 (an entry)
    if found is None:
        raise SystemExit(f"{args.site}/manifest.json: names no renderer version")
    version = found.group(1)
    plan.renderer_version = lambda *_args, **_kwargs: version  # type: ignore[assignment]
    result = build_site(args.store, args.site, "/", jobs=1, keep_traces=args.keep_traces)
    print(result.summary())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
