#!/usr/bin/env bash
# Does adding one run grow with the store? Two store sizes and two commits, all four builds in each round.
#
#   bash benchmarks/add_one_growth.sh BASE_COMMIT SMALL BIG [ROUNDS] > benchmarks/results/NAME.txt
#   SMALL_FROM=/path/store-1000 BIG_FROM=/path/store-10000 bash benchmarks/add_one_growth.sh BASE 1000 10000 9
#
# Makes (or copies with hard links, from SMALL_FROM / BIG_FROM: bundles are never changed in place) one synthetic
# store of SMALL runs and one of BIG runs (bench_site.py's, from the real CPU run in benchmarks/data), a copy of
# each per side (each side's first build writes its own catalog), builds a site of each with each side
# (--keep-traces 20), then ROUNDS times: stores one more run in each store and times the four builds (`reportgen build`, /usr/bin/time: wall and CPU), their order
# rotating from round to round. The sizes are measured in the same minutes, so the difference of their medians
# (the growth) is not the machine's drift between two runs of a script. BASE runs from a git worktree, from a
# folder outside this checkout, so that it imports its own code. The machine is shared: quote medians.
set -euo pipefail
exec 2>&1
base=${1:?base commit}; small=${2:?small store runs}; big=${3:?big store runs}; rounds=${4:-9}
root=$(cd "$(dirname "$0")/.." && pwd)
py="$root/.venv/bin/python"
# shellcheck source=benchmarks/add_one_lib.sh
. "$root/benchmarks/add_one_lib.sh"
base_worktree "$base" add-one-growth
build() {  # side, runs, label
  local code="$root"; [ "$1" = base ] && code="$work/base"
  timed_build "$3 $1 $2" "$code" "$work/store-$1-$2" "$work/site-$1-$2"
}
echo "base $(git -C "$root" rev-parse --short "$base"), head $(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet || echo ' (uncommitted changes)'), $small and $big runs, $(nproc) CPUs, $(date -u +%FT%TZ)"
prepare_store "$work/store-$small" "$small" "${SMALL_FROM:-}"
prepare_store "$work/store-$big" "$big" "${BIG_FROM:-}"
for n in "$small" "$big"; do  # each side its own copy: its catalog, in its own format, read only by its builds
  for side in base head; do cp -al "$work/store-$n" "$work/store-$side-$n"; done
  rm -rf "$work/store-$n"
done
for side in base head; do for n in "$small" "$big"; do build "$side" "$n" cold; done; done
order=("base $small" "head $big" "base $big" "head $small")
for k in $(seq 1 "$rounds"); do
  for side in base head; do
    make_runs "$work/store-$side-$small" $((small + k - 1)) 1
    make_runs "$work/store-$side-$big" $((big + k - 1)) 1
  done
  for j in 0 1 2 3; do
    # shellcheck disable=SC2086  # "side runs"
    build ${order[$(((j + k) % 4))]} "add $k"
  done
done
report_machine
summarise
