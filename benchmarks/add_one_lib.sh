# Shared by add_one_side_by_side.sh and add_one_growth.sh (sourced, not run): the base commit's worktree, synthetic
# stores, and timed builds. Expects $root (this checkout) and $py (its venv's python); sets $work.

# Python keeps the compiled modules of both sides, as an installed wheel has them (a PYTHONDONTWRITEBYTECODE set
# outside would make every build compile reportgen's modules again).
unset PYTHONDONTWRITEBYTECODE

# A temporary folder with the base commit checked out in "$work/base" (removed on exit), importing its own code.
base_worktree() {  # base commit, name for the temporary folder
  work=$(mktemp -d "/tmp/$2.XXXXXX")
  trap 'git -C "$root" worktree remove --force "$work/base" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
  git -C "$root" worktree add -q --detach "$work/base" "$1"
  ln -s ../templates "$work/base/reportgen/templates"   # the package data, where an installed wheel has it
  ln -s ../scenarios "$work/base/reportgen/scenarios"
}

make_runs() {  # store, first run number, count: bench_site.py's synthetic runs (the real CPU run in benchmarks/data)
  "$py" -c "import sys; sys.path.insert(0, '$root/benchmarks'); import bench_site; from pathlib import Path; \
bench_site.make_store(Path('$1'), $2, $3)"
}

# A store of N runs at the path given: a hard-linked copy of FROM's bundles (never changed in place) when FROM is
# set, else written. Either way without a catalog: the side's first build writes it, in that side's format.
prepare_store() {  # store, runs, FROM (may be empty)
  if [ -n "$3" ]; then
    cp -al "$3" "$1"
    rm -rf "$1/.catalog"
    [ "$(find "$1" -mindepth 1 -maxdepth 1 -not -name '.*' | wc -l)" = "$2" ] || { echo "$3: not $2 runs"; exit 2; }
  else
    make_runs "$1" 0 "$2"
  fi
}

timed_build() {  # label printed before the times, code folder (PYTHONPATH), store, site; also kept in $work/times
  /usr/bin/time -a -o "$work/times" -f "$1 %e s wall %U+%S s cpu" env -C "$work" PYTHONPATH="$2" "$py" -m reportgen \
    build --runs "$3" --out "$4" --keep-traces 20 >/dev/null
  tail -n 1 "$work/times"
}

summarise() {  # the median wall and CPU time (user+system, the build's processes) of the timed adds, per side and size
  "$py" - "$work/times" <<'PY'
import re, statistics, sys
cells = {}
for line in open(sys.argv[1]):
    m = re.match(r"add \d+ (\w+)( \d+)? ([\d.]+) s wall ([\d.]+)\+([\d.]+) s cpu", line)
    if m:
        cells.setdefault((m[1], m[2] or ""), []).append((float(m[3]), float(m[4]) + float(m[5])))
for (side, runs), times in sorted(cells.items()):
    wall = sorted(w for w, _ in times)
    cpu = [c for _, c in times]
    print(f"median {side}{runs}: {statistics.median(wall):.2f} s wall ({wall[0]:.2f}-{wall[-1]:.2f}), "
          f"{statistics.median(cpu):.2f} s cpu, {len(times)} builds")
PY
}

report_machine() {  # the reference loop and the load average, after the builds
  "$py" -c "import sys; sys.path.insert(0, '$root/benchmarks'); from machine import reference_loop_s; \
print('reference loop', reference_loop_s(), 's')"
  echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
}
