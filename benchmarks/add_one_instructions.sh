#!/usr/bin/env bash
# Does adding one run grow with the store? Counted in instructions, which the machine's other work does not change.
#
#   bash benchmarks/add_one_instructions.sh BASE_COMMIT SMALL BIG [ROUNDS] > benchmarks/results/NAME.txt
#   SMALL_FROM=/path/store-1000 BIG_FROM=/path/store-10000 bash benchmarks/add_one_instructions.sh BASE 1000 10000
#
# Wall times on a shared 2-core machine drift by more than the growth being measured (add_one_growth.sh's medians
# at 10,000 runs moved by up to 0.26 s between three runs on one afternoon). Here each side (BASE, from a git
# worktree, and this checkout) gets its own copy of a store of SMALL and of BIG runs (made as bench_site.py makes them, or hard-linked from SMALL_FROM / BIG_FROM) and
# a cold-built site of each; then ROUNDS times one more run is stored in all four stores and each build is run under
# valgrind's callgrind, which counts the instructions the build executes. The builds run in one process
# (REPORTGEN_JOBS=1: the page is drawn where the lists are written, so no child process is counted twice) with
# PYTHONHASHSEED=0. Instructions are not seconds (a cache miss costs more than an add), but their growth from SMALL
# to BIG is the work that grows with the store, measured without noise. Needs valgrind (Debian: apt-get install
# valgrind); each counted build takes about a minute.
set -euo pipefail
exec 2>&1
base=${1:?base commit}; small=${2:?small store runs}; big=${3:?big store runs}; rounds=${4:-2}
root=$(cd "$(dirname "$0")/.." && pwd)
py="$root/.venv/bin/python"
command -v valgrind >/dev/null || { echo "add_one_instructions.sh: needs valgrind (apt-get install valgrind)"; exit 2; }
# shellcheck source=benchmarks/add_one_lib.sh
. "$root/benchmarks/add_one_lib.sh"
base_worktree "$base" add-one-instructions
code_of() { if [ "$1" = base ]; then echo "$work/base"; else echo "$root"; fi; }
echo "base $(git -C "$root" rev-parse --short "$base"), head $(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet || echo ' (uncommitted changes)'), $small and $big runs, $(valgrind --version), $(date -u +%FT%TZ)"
for side in base head; do
  prepare_store "$work/store-$side-$small" "$small" "${SMALL_FROM:-}"
  prepare_store "$work/store-$side-$big" "$big" "${BIG_FROM:-}"
  for n in "$small" "$big"; do
    timed_build "cold $side $n" "$(code_of "$side")" "$work/store-$side-$n" "$work/site-$side-$n"
  done
done
for k in $(seq 1 "$rounds"); do
  for side in base head; do for n in "$small" "$big"; do make_runs "$work/store-$side-$n" $((big + k - 1)) 1; done; done
  for n in "$small" "$big"; do for side in base head; do
    # the same build first without valgrind, on a hard-linked copy: it must draw only the new pages
    cp -al "$work/store-$side-$n" "$work/try-store"; cp -al "$work/site-$side-$n" "$work/try-site"
    summary=$(env -C "$work" PYTHONHASHSEED=0 REPORTGEN_JOBS=1 PYTHONPATH="$(code_of "$side")" "$py" -m reportgen \
      build --runs "$work/try-store" --out "$work/try-site" --keep-traces 20)
    rm -rf "$work/try-store" "$work/try-site"
    echo "$side $n: $summary"
    case $summary in *" 0 unchanged"*) echo "not an add: every page was drawn again (did the code change?)"; exit 1;; esac
    env -C "$work" PYTHONHASHSEED=0 REPORTGEN_JOBS=1 PYTHONPATH="$(code_of "$side")" valgrind --tool=callgrind \
      --callgrind-out-file=/dev/null "$py" -m reportgen build --runs "$work/store-$side-$n" \
      --out "$work/site-$side-$n" --keep-traces 20 > "$work/log" 2>&1 || { cat "$work/log"; exit 1; }
    echo "add $k $side $n $(sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$work/log") instructions"
  done; done
done | tee "$work/counts"
"$py" - "$work/counts" "$small" "$big" <<'PY'
import re, statistics, sys
counts, small, big = {}, int(sys.argv[2]), int(sys.argv[3])
for line in open(sys.argv[1]):
    m = re.match(r"add \d+ (\w+) (\d+) (\d+) instructions", line)
    if m:
        counts.setdefault((m[1], int(m[2])), []).append(int(m[3]))
for side in ("base", "head"):
    a, b = statistics.median(counts[side, small]), statistics.median(counts[side, big])
    print(f"{side}: {a / 1e9:.3f} G instructions at {small} runs, {b / 1e9:.3f} G at {big}; growth {(b - a) / 1e9:.3f} G, "
          f"{(b - a) / (big - small) / 1e3:.0f} k instructions per stored run")
PY
