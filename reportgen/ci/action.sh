#!/usr/bin/env bash
# The reportgen GitHub Action's logic (action.yml runs this; tests/test_action.py runs it too, with a
# fake GITHUB_* environment and a local bare remote).
#
#   action.sh pull-request   profile the PR's base and head, compare each scenario, post or update one
#                            comment (hidden marker <!-- reportgen-compare -->), exit 1 on a regression
#   action.sh push           profile, keep the run in the results branch, build the site into $RG_SITE_DIR
#
# Inputs (environment): RG_SCENARIOS (space-separated; empty: the config's), RG_DEVICE, RG_THRESHOLD,
# RG_MACHINE, RG_INSTALL (shell command installing the user's own package, run in each checkout),
# RG_RESULTS_BRANCH, RG_BASE_URL, RG_SITE_URL, RG_SITE_DIR, GITHUB_TOKEN; GitHub's own GITHUB_* variables.
set -euo pipefail

workspace="${GITHUB_WORKSPACE:-$PWD}"
tmp="${RUNNER_TEMP:-${TMPDIR:-/tmp}}"
branch="${RG_RESULTS_BRANCH:-reportgen-results}"

log() { echo "reportgen-action: $*" >&2; }

profile_args() {
  local args=(--quiet)
  [ -n "${RG_DEVICE:-}" ] && args+=(--device "$RG_DEVICE")
  [ -n "${RG_MACHINE:-}" ] && args+=(--machine "$RG_MACHINE")
  for s in ${RG_SCENARIOS:-}; do args+=(--scenario "$s"); done
  printf '%s\n' "${args[@]}"
}

# profile DIR STORE LABEL: install the user's package in DIR, then profile there; exit 4 (a variant
# failed or was wrong) is stored and shown, so it does not stop the action.
profile() {
  local dir="$1" store="$2" label="$3" rc=0
  if [ -n "${RG_INSTALL:-}" ]; then
    log "installing the package in $dir: $RG_INSTALL"
    (cd "$dir" && bash -c "$RG_INSTALL")
  fi
  mapfile -t args < <(profile_args)
  (cd "$dir" && reportgen profile "${args[@]}" --store "$store" --label "$label") || rc=$?
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 4 ]; then
    log "reportgen profile in $dir failed (exit $rc)"
    return "$rc"
  fi
}

pull_request() {
  local sha="${GITHUB_SHA:-$(git -C "$workspace" rev-parse HEAD)}"
  local event="${GITHUB_EVENT_PATH:?GITHUB_EVENT_PATH is not set}"
  local base_sha pr store="$tmp/reportgen-pr-results" comment="$tmp/reportgen-comment.md" gate=0
  base_sha="$(python -c 'import json,sys; print(json.load(open(sys.argv[1]))["pull_request"]["base"]["sha"])' "$event")"
  pr="$(python -c 'import json,sys; print(json.load(open(sys.argv[1]))["pull_request"]["number"])' "$event")"
  git -C "$workspace" cat-file -e "$base_sha^{commit}" 2>/dev/null || git -C "$workspace" fetch --quiet --depth=1 origin "$base_sha"
  rm -rf "$tmp/reportgen-base" "$store"
  git -C "$workspace" worktree add --quiet --detach "$tmp/reportgen-base" "$base_sha"
  profile "$tmp/reportgen-base" "$store" "base ${base_sha:0:7}" || log "the base could not be profiled; comparing what exists"
  profile "$workspace" "$store" "head ${sha:0:7}"
  git -C "$workspace" worktree remove --force "$tmp/reportgen-base"
  {
    echo "<!-- reportgen-compare -->"
    local first=1
    for scenario in $(reportgen runs --store "$store" | tail -n +2 | cut -f5 | sort -u); do
      [ "$first" -eq 1 ] || echo; first=0
      local rc=0 out="$tmp/reportgen-compare-$scenario.md"
      # With the `ab` command: switch this line to reportgen ab --base <dir> --head <dir> (interleaved runs).
      reportgen compare latest~1 latest --store "$store" --scenario "$scenario" --fail-on-regression \
        ${RG_THRESHOLD:+--threshold "$RG_THRESHOLD"} ${RG_SITE_URL:+--site-url "$RG_SITE_URL"} --output "$out" || rc=$?
      if [ "$rc" -eq 0 ] || [ "$rc" -eq 1 ]; then
        grep -v -F -x "<!-- reportgen-compare -->" "$out"
        [ "$rc" -eq 1 ] && gate=1
      else
        echo "**$scenario**: not compared (reportgen compare exit $rc; see the job log)."
      fi
    done
  } > "$comment"
  echo "comment=$comment" >> "${GITHUB_OUTPUT:-/dev/null}"
  python -m reportgen.ci.comment --pr "$pr" --body "$comment"
  if [ "$gate" -eq 1 ]; then
    echo "::error::reportgen: a variant is significantly slower, or broken in the head (see the pull-request comment)"
    exit 1
  fi
}

push() {
  local sha="${GITHUB_SHA:-$(git -C "$workspace" rev-parse HEAD)}"
  local results="$tmp/reportgen-results" site="${RG_SITE_DIR:-$tmp/reportgen-site}"
  git -C "$workspace" config user.name >/dev/null || git -C "$workspace" config user.name "github-actions[bot]"
  git -C "$workspace" config user.email >/dev/null || \
    git -C "$workspace" config user.email "41898282+github-actions[bot]@users.noreply.github.com"
  rm -rf "$results"
  if git -C "$workspace" fetch --quiet origin "$branch" 2>/dev/null; then
    git -C "$workspace" worktree add --quiet --detach "$results" FETCH_HEAD
  else
    local empty
    empty="$(git -C "$workspace" hash-object -t tree /dev/null)"
    git -C "$workspace" worktree add --quiet --detach "$results" \
      "$(git -C "$workspace" commit-tree "$empty" -m 'reportgen results store')"
  fi
  profile "$workspace" "$results" "${GITHUB_REF_NAME:-main} ${sha:0:7}"
  git -C "$results" add -A .
  git -C "$results" commit --quiet -m "reportgen run for $sha"
  git -C "$results" push --quiet origin "HEAD:refs/heads/$branch"
  (cd "$workspace" && reportgen build --runs "$results" --out "$site" ${RG_BASE_URL:+--base-url "$RG_BASE_URL"})
  git -C "$workspace" worktree remove --force "$results"
  echo "site=$site" >> "${GITHUB_OUTPUT:-/dev/null}"
}

# Sourced (by a test) it only defines the functions above.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  case "${1:-}" in
    pull-request) pull_request ;;
    push) push ;;
    *) log "unknown mode '${1:-}': use pull-request or push"; exit 2 ;;
  esac
fi
