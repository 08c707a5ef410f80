#!/usr/bin/env bash
# Does adding one run grow with the store? Two store sizes and two commits, all four builds in each round.
#
#   bash benchmarks/add_one_growth.sh BASE_COMMIT SMALL BIG [ROUNDS] > benchmarks/results/NAME.txt
#   SMALL_FROM=/path/store-1000 BIG_FROM=/path/store-10000 bash benchmarks/add_one_growth.sh BASE 1000 10000 9
#
# Makes (or copies with hard links, from SMALL_FROM / BIG_FROM: bundles and catalog parts are never changed in
# place) one synthetic store of SMALL runs and one of BIG runs (bench_site.py's, from the real CPU run in
# benchmarks/data), builds a site of each with each side (--keep-traces 20), then ROUNDS times: stores one more
# run in each store and times the four builds (`reportgen build`, /usr/bin/time: wall and CPU), their order
# rotating from round to round. The sizes are measured in the same minutes, so the difference of their medians
# (the growth) is not the machine's drift between two runs of a script. BASE runs from a git worktree, from a
# folder outside this checkout, so that it imports its own code. The machine is shared: quote medians.
set -euo pipefail
exec 2>&1
base=${1:?base commit}; small=${2:?small store runs}; big=${3:?big store runs}; rounds=${4:-9}
root=$(cd "$(dirname "$0")/.." && pwd)
py="$root/.venv/bin/python"
work=$(mktemp -d /tmp/add-one-growth.XXXXXX)
trap 'git -C "$root" worktree remove --force "$work/base" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
git -C "$root" worktree add -q --detach "$work/base" "$base"
ln -s ../templates "$work/base/reportgen/templates"   # the package data, where an installed wheel has it
ln -s ../scenarios "$work/base/reportgen/scenarios"
make_runs() {  # store, first, count
  "$py" -c "import sys; sys.path.insert(0, '$root/benchmarks'); import bench_site; from pathlib import Path; \
bench_site.make_store(Path('$1'), $2, $3)"
}
prepare() {  # runs, copy-from
  local store="$work/store-$1"
  if [ -n "$2" ]; then
    cp -al "$2" "$store"
    [ "$(find "$store" -mindepth 1 -maxdepth 1 -not -name '.*' | wc -l)" = "$1" ] || { echo "$2: not $1 runs"; exit 2; }
  else
    make_runs "$store" 0 "$1"
  fi
}
build() {  # side, runs, label
  local code="$root"; [ "$1" = base ] && code="$work/base"
  /usr/bin/time -f "$3 $1 $2 %e s wall %U+%S s cpu" env -C "$work" PYTHONPATH="$code" "$py" -m reportgen \
    build --runs "$work/store-$2" --out "$work/site-$1-$2" --keep-traces 20 >/dev/null
}
echo "base $(git -C "$root" rev-parse --short "$base"), head $(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet || echo ' (uncommitted changes)'), $small and $big runs, $(nproc) CPUs, $(date -u +%FT%TZ)"
prepare "$small" "${SMALL_FROM:-}"
prepare "$big" "${BIG_FROM:-}"
for side in base head; do for n in "$small" "$big"; do build "$side" "$n" cold; done; done
order=("base $small" "head $big" "base $big" "head $small")
for k in $(seq 1 "$rounds"); do
  make_runs "$work/store-$small" $((small + k - 1)) 1
  make_runs "$work/store-$big" $((big + k - 1)) 1
  for j in 0 1 2 3; do
    # shellcheck disable=SC2086  # "side runs"
    build ${order[$(((j + k) % 4))]} "add $k"
  done
done
"$py" -c "import sys; sys.path.insert(0, '$root/benchmarks'); from machine import reference_loop_s; \
print('reference loop', reference_loop_s(), 's')"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
