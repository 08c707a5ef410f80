#!/usr/bin/env bash
# Adding one run to an N-run site, an older commit (BASE) against this checkout (HEAD), alternating builds.
#
#   bash benchmarks/add_one_side_by_side.sh BASE_COMMIT RUNS [PAIRS] > benchmarks/results/NAME.txt
#   STORE_FROM=/path/to/store bash benchmarks/add_one_side_by_side.sh BASE_COMMIT RUNS [PAIRS]
#
# STORE_FROM: start from a copy (hard links: bundles are never changed in place; not its catalog, which the first
# build writes) of a store made before by this script or bench_site.py with RUNS runs (10,000 runs take minutes).
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
# shellcheck source=benchmarks/add_one_lib.sh
. "$root/benchmarks/add_one_lib.sh"
base_worktree "$base" add-one-ab
store="$work/store"
prepare_store "$store" "$runs" "${STORE_FROM:-}"
build() {  # side, label
  local code="$root"; [ "$1" = base ] && code="$work/base"
  timed_build "$2 $1" "$code" "$store" "$work/site-$1"
}
echo "base $(git -C "$root" rev-parse --short "$base"), head $(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet || echo ' (uncommitted changes)'), $runs runs, $(nproc) CPUs, $(date -u +%FT%TZ)"
build base cold
build head cold
for k in $(seq 1 "$pairs"); do
  make_runs "$store" $((runs + k - 1)) 1
  if [ $((k % 2)) = 1 ]; then build base "add $k"; build head "add $k"; else build head "add $k"; build base "add $k"; fi
done
report_machine
summarise
