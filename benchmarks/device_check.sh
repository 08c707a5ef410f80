#!/usr/bin/env bash
# One-call GPU check of reportgen's CUDA path (see benchmarks/README.md, "GPU check: benchmarks/device_check.sh").
#
#   OUT=/path/to/out bash benchmarks/device_check.sh            # on a CUDA machine, from anywhere
#   OUT=/tmp/dc bash benchmarks/device_check.sh --dry-run       # rehearsal on a CPU machine (--device cpu)
#
# Needs: python3 with torch (CUDA build), triton, jinja2, matplotlib, markdown; no network. It copies this
# checkout to a temporary folder, installs the copy there offline (pip --no-deps --no-build-isolation --target),
# and runs benchmarks/device_check.py, which writes summary.json, summary.md, ab.json, nvidia-smi.txt and
# store.tar.gz into $OUT (default ./device-check-out); everything printed goes to $OUT/log.txt too.
# The whole run is bounded by DEVICE_CHECK_BUDGET_S seconds (default 570, under 10 minutes).
# Exit code: 0 every check passed; 1 a check failed or broke; 2 the Python part did not finish.
# Nothing in the checkout is written to (unless $OUT lies inside it). Set KEEP_WORK=1 to keep the temporary folder.

set -u -o pipefail

START=$(date +%s)
BUDGET_S=${DEVICE_CHECK_BUDGET_S:-570}
DEADLINE=$((START + BUDGET_S))
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY=${PYTHON:-python3}
OUT=${OUT:-./device-check-out}
mkdir -p "$OUT" || { echo "device_check: cannot create OUT=$OUT" >&2; exit 2; }
OUT="$(cd "$OUT" && pwd)"
rm -f "$OUT/summary.json" "$OUT/summary.md" "$OUT/store.tar.gz" "$OUT/ab.json" "$OUT/nvidia-smi.txt" "$OUT/log.txt"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/device-check.XXXXXX")"

main() {
    echo "device_check: started $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname); checkout $HERE; OUT=$OUT; WORK=$WORK"
    echo "device_check: budget ${BUDGET_S} s; python: $(command -v "$PY") ($("$PY" --version 2>&1))"
    echo "device_check: CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-(unset)}"

    DC_GIT_SHA="$(git -C "$HERE" rev-parse HEAD 2>/dev/null || true)"
    DC_GIT_DIRTY="$(git -C "$HERE" status --porcelain --untracked-files=no 2>/dev/null | wc -l | tr -d ' ')"
    export DC_GIT_SHA DC_GIT_DIRTY
    echo "device_check: git ${DC_GIT_SHA:-(not a git checkout)}, ${DC_GIT_DIRTY:-0} changed tracked file(s)"

    # A copy of the checkout (the build writes build/ and *.egg-info into the source folder); ab measures it.
    local excludes=(--exclude=./.git --exclude=./.venv --exclude=./venv --exclude=./.mypy_cache --exclude=./.ruff_cache
                    --exclude=./.pytest_cache --exclude=./.hypothesis --exclude=./.cache --exclude=./results
                    --exclude=./site --exclude=./build --exclude='*.egg-info' --exclude=__pycache__
                    --exclude=./device-check-out --exclude=./test-artifacts --exclude=./node_modules)
    case "$OUT/" in "$HERE"/*) excludes+=("--exclude=./${OUT#"$HERE"/}") ;; esac
    mkdir -p "$WORK/src"
    if ! tar -C "$HERE" "${excludes[@]}" -cf - . | tar -C "$WORK/src" -xf -; then
        echo "device_check: ERROR copying the checkout to $WORK/src"
    fi

    # Offline install of the copy into $WORK/pkgs; if pip cannot build it, lay the package out by hand as
    # pyproject.toml maps it (templates/ -> reportgen/templates, scenarios/ -> reportgen/scenarios).
    local install="pip --target (offline)"
    export PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
    if ! (cd "$WORK" && "$PY" -m pip install -q --no-deps --no-build-isolation --target "$WORK/pkgs" "$WORK/src"); then
        echo "device_check: pip install failed; falling back to copying the package into place"
        rm -rf "$WORK/pkgs" && mkdir -p "$WORK/pkgs" &&
            cp -r "$WORK/src/reportgen" "$WORK/pkgs/reportgen" &&
            cp -r "$WORK/src/templates" "$WORK/pkgs/reportgen/templates" &&
            cp -r "$WORK/src/scenarios" "$WORK/pkgs/reportgen/scenarios"
        install="copied into place (pip install failed: see log.txt)"
    fi
    export PYTHONPATH="$WORK/pkgs${PYTHONPATH:+:$PYTHONPATH}"
    if ! (cd "$WORK" && "$PY" -c "import reportgen, reportgen.scenarios, reportgen.templates, reportgen.cli; print('device_check: reportgen', reportgen.__version__, 'from', reportgen.__file__)"); then
        install="$install; IMPORT FAILED (see log.txt)"
    fi

    local left=$((DEADLINE - $(date +%s)))
    [ "$left" -lt 60 ] && left=60  # (timeout 0 would mean no limit)
    local rc=0
    # The script from the copy; run from $WORK so that no config file of the checkout applies.
    (cd "$WORK" && timeout --signal=TERM --kill-after=15 "$left" "$PY" "$WORK/src/benchmarks/device_check.py" \
        --out "$OUT" --work "$WORK" --src "$WORK/src" --deadline "$DEADLINE" --install "$install" "$@") || rc=$?
    echo "device_check: device_check.py exit code $rc after $(( $(date +%s) - START )) s"

    if [ ! -s "$OUT/summary.json" ]; then
        printf '{"what": "reportgen GPU check: the output of ONE run", "complete": false, "error": "device_check.py wrote no summary (exit code %s); see log.txt", "checks": []}\n' "$rc" > "$OUT/summary.json"
        printf '# reportgen GPU check\n\n**ERROR**: device_check.py wrote no summary (exit code %s); see log.txt. This is the output of one run.\n' "$rc" > "$OUT/summary.md"
        rc=2
    elif [ "$rc" -ne 0 ] && [ "$rc" -ne 1 ]; then
        printf '\n**The Python part did not finish (exit code %s: 124 is the time limit)**; the rows above are the checks it finished.\n' "$rc" >> "$OUT/summary.md"
        rc=2
    fi
    if [ ! -s "$OUT/store.tar.gz" ] && [ -d "$WORK/store" ]; then
        echo "device_check: no tarball from the Python part; packing the store (run.json and profile.log only)"
        (cd "$WORK" && find store site -type f \( -name run.json -o -name profile.log -o -name '*.md' \) 2>/dev/null |
            tar -czf "$OUT/store.tar.gz" -T -) || echo "device_check: ERROR packing the store"
    fi
    if [ "${KEEP_WORK:-0}" = 1 ]; then
        echo "device_check: kept $WORK"
    else
        rm -rf "$WORK"
    fi
    echo "device_check: done in $(( $(date +%s) - START )) s; exit code $rc; files in $OUT:"
    ls -l "$OUT"
    return "$rc"
}

main "$@" 2>&1 | tee "$OUT/log.txt"
exit "${PIPESTATUS[0]}"
