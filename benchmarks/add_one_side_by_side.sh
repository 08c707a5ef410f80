#!/usr/bin/env bash
# Adding one run to an N-run site, an older commit (BASE) against this checkout (HEAD), alternating builds.
#
#   bash benchmarks/add_one_side_by_side.sh BASE_COMMIT RUNS [PAIRS] > benchmarks/results/NAME.txt
#   STORE_FROM=/path/to/store bash benchmarks/add_one_side_by_side.sh BASE_COMMIT RUNS [PAIRS]
#
# STORE_FROM: start from a copy (hard links: bundles and catalog parts are never changed in place) of a store
# made before by this script or bench_site.py with RUNS runs, instead of writing one (10,000 runs take minutes).
# Makes a synthetic store of RUNS runs (bench_site.py's, from the real CPU run in benchmarks/data), builds a
# site from it with each side (--keep-traces 20), then PAIRS times: stores one more run and times
# `reportgen build` of each side on it (/usr/bin/time: wall and CPU), the side that goes first alternating.
# BASE runs from a git worktree, from a folder outside this checkout, so that it imports its own code.
# The machine is shared: only the ratio of medians measured in one run is a figure.
set -euo pipefail
exec 2>&1
base=${1:?base commit}; runs=${2:?number of runs}; pairs=${3:-7}
root=$(cd "$(dirname "$0")/.." && pwd)
py="$root/.venv/bin/python"
work=$(mktemp -d /tmp/add-one-ab.XXXXXX)
trap 'git -C "$root" worktree remove --force "$work/base" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
git -C "$root" worktree add -q --detach "$work/base" "$base"
ln -s ../templates "$work/base/reportgen/templates"   # the package data, where an installed wheel has it
ln -s ../scenarios "$work/base/reportgen/scenarios"
store="$work/store"
if [ -n "${STORE_FROM:-}" ]; then
  cp -al "$STORE_FROM" "$store"
  [ "$(find "$store" -mindepth 1 -maxdepth 1 -not -name '.*' | wc -l)" = "$runs" ] || { echo "$STORE_FROM: not $runs runs"; exit 2; }
else
  "$py" -c "import sys; sys.path.insert(0, '$root/benchmarks'); import bench_site; from pathlib import Path; \
bench_site.make_store(Path('$store'), 0, $runs)"
fi
build() {  # side, label
  if [ "$1" = base ]; then
    /usr/bin/time -f "$2 base %e s wall %U+%S s cpu" env -C "$work" PYTHONPATH="$work/base" "$py" -m reportgen \
      build --runs "$store" --out "$work/site-base" --keep-traces 20 >/dev/null
  else
    /usr/bin/time -f "$2 head %e s wall %U+%S s cpu" env -C "$work" PYTHONPATH="$root" "$py" -m reportgen \
      build --runs "$store" --out "$work/site-head" --keep-traces 20 >/dev/null
  fi
}
echo "base $(git -C "$root" rev-parse --short "$base"), head $(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet || echo ' (uncommitted changes)'), $runs runs, $(nproc) CPUs, $(date -u +%FT%TZ)"
build base cold
build head cold
for k in $(seq 1 "$pairs"); do
  "$py" -c "import sys; sys.path.insert(0, '$root/benchmarks'); import bench_site; from pathlib import Path; \
bench_site.make_store(Path('$store'), $runs + $k - 1, 1)"
  if [ $((k % 2)) = 1 ]; then build base "add $k"; build head "add $k"; else build head "add $k"; build base "add $k"; fi
done
"$py" -c "import sys; sys.path.insert(0, '$root/benchmarks'); from machine import reference_loop_s; \
print('reference loop', reference_loop_s(), 's')"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
