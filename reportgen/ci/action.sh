#!/usr/bin/env bash
# The reportgen GitHub Action's logic (action.yml runs this; tests/test_action.py runs it too, with a
# fake GITHUB_* environment and a local bare remote).
#
#   action.sh pull-request   check out the PR's base as a worktree beside the head, install the user's package
#                            in each (base, then head), then for each scenario run `reportgen ab` (base and
#                            head measured interleaved, one worker process per checkout); post or update one
#                            comment (hidden marker <!-- reportgen-compare -->); exit 1 when an A/B pair
#                            regressed (slower beyond the threshold, or a variant broken in head only)
#   action.sh push           profile, keep the run in the results branch, build the site into $RG_SITE_DIR,
#                            list the history's steps (`reportgen history`); a new step is an error annotation,
#                            and with RG_FAIL_ON_STEP=true the job fails (exit 1) once the site is built
#   action.sh calibrate      for each scenario, `reportgen ab --calibrate` of this commit against itself on this
#                            runner (its report in the log), kept in the results branch; pull-request mode reads
#                            the results branch, so its comments state the runner's calibration
#
# Inputs (environment): RG_SCENARIOS (space-separated; empty: the head's config's, see
# `reportgen scenarios --names`), RG_DEVICE, RG_THRESHOLD, RG_AB_ARGS (more `reportgen ab` flags,
# space-separated, e.g. "--max-seconds 300"), RG_MACHINE (push), RG_INSTALL (shell command installing the
# user's own package, run in each checkout), RG_FAIL_ON_STEP (push: true or false), RG_RESULTS_BRANCH, RG_BASE_URL, RG_SITE_URL (not used by
# pull-request mode: its A/B runs are not published), RG_SITE_DIR, GITHUB_TOKEN; GitHub's own GITHUB_*
# variables.
set -euo pipefail
set -f  # no glob expansion anywhere: an input such as RG_SCENARIOS='*' is a word, never the checkout's file names

workspace="${GITHUB_WORKSPACE:-$PWD}"
tmp="${RUNNER_TEMP:-${TMPDIR:-/tmp}}"
branch="${RG_RESULTS_BRANCH:-reportgen-results}"

log() { echo "reportgen-action: $*" >&2; }
refuse() { log "$*"; exit 2; }

# check_inputs: every input is one line (a line break would become extra arguments); RG_INSTALL, a shell
# command the user writes for their own runner, may span lines. Values reach commands only as single,
# quoted words after their flag (--flag=VALUE) or after `--`, so none is read as an option.
check_inputs() {
  local name value
  for name in RG_SCENARIOS RG_DEVICE RG_MACHINE RG_THRESHOLD RG_AB_ARGS RG_RESULTS_BRANCH RG_BASE_URL \
              RG_SITE_DIR RG_SITE_URL GITHUB_REF_NAME GITHUB_SHA GITHUB_WORKSPACE RUNNER_TEMP; do
    value="${!name:-}"
    case "$value" in
      *$'\n'* | *$'\r'*) refuse "$name: contains a line break; give the value on one line" ;;
    esac
  done
  check_branch_name RG_RESULTS_BRANCH "$branch"
  case "${RG_FAIL_ON_STEP:-false}" in
    true | false) ;;
    *) refuse "RG_FAIL_ON_STEP: '${RG_FAIL_ON_STEP:0:40}' is neither true nor false" ;;
  esac
  if [ -n "${GITHUB_SHA:-}" ] && ! [[ "$GITHUB_SHA" =~ ^[0-9a-f]{40}([0-9a-f]{24})?$ ]]; then
    refuse "GITHUB_SHA: '${GITHUB_SHA:0:80}' is not a commit id"
  fi
}

# check_branch_name NAME VALUE: VALUE must be a plain branch name (main, reportgen-results), never an option.
check_branch_name() {
  local name="$1" value="$2"
  case "$value" in
    "" | -* | refs/* | HEAD | @ | *@\{*) refuse "$name: '${value:0:80}' is not a branch name; give a plain name such as reportgen-results" ;;
  esac
  [[ "$value" =~ ^[A-Za-z0-9._/-]+$ ]] || \
    refuse "$name: '${value:0:80}' is not a branch name (letters, digits, '.', '_', '-', '/'); give a plain name such as reportgen-results"
  git check-ref-format --branch "$value" >/dev/null 2>&1 || \
    refuse "$name: '${value:0:80}' is not a valid branch name; give a plain name such as reportgen-results"
}

# profile_args: the `reportgen profile` flags from the inputs, in the array PROFILE_ARGS (no word is split
# twice: a scenario is one word of RG_SCENARIOS, however it is spelled).
profile_args() {
  local s scenarios=()
  PROFILE_ARGS=(--quiet)
  [ -n "${RG_DEVICE:-}" ] && PROFILE_ARGS+=("--device=$RG_DEVICE")
  [ -n "${RG_MACHINE:-}" ] && PROFILE_ARGS+=("--machine=$RG_MACHINE")
  read -r -a scenarios <<< "${RG_SCENARIOS:-}"
  for s in ${scenarios[@]+"${scenarios[@]}"}; do PROFILE_ARGS+=("--scenario=$s"); done
  return 0
}

# install DIR: run RG_INSTALL (the user's package) in DIR, if given.
install() {
  local dir="$1"
  [ -n "${RG_INSTALL:-}" ] || return 0
  log "installing the package in $dir: $RG_INSTALL"
  (cd "$dir" && bash -c "$RG_INSTALL")
}

# profile DIR STORE LABEL: install the user's package in DIR, then profile there; exit 4 (a variant
# failed or was wrong) is stored and shown, so it does not stop the action.
profile() {
  local dir="$1" store="$2" label="$3" rc=0
  install "$dir"
  profile_args
  (cd "$dir" && reportgen profile "${PROFILE_ARGS[@]}" "--store=$store" "--label=$label") || rc=$?
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 4 ]; then
    log "reportgen profile in $dir failed (exit $rc)"
    return "$rc"
  fi
}

# pr_scenarios: the scenarios to A/B, one per line: RG_SCENARIOS, else the head checkout's config's.
pr_scenarios() {
  local names=()
  if [ -n "${RG_SCENARIOS:-}" ]; then
    read -r -a names <<< "$RG_SCENARIOS"
    printf '%s\n' "${names[@]}"
  else
    (cd "$workspace" && reportgen scenarios --names)
  fi
}

# event_field FILE KEY...: one field of the event file; a missing file or field, or a file that is not JSON, is
# one line and exit 2 (never a Python traceback).
event_field() {
  python -c 'import json, sys
try:
    with open(sys.argv[1], encoding="utf-8") as fh:
        value = json.load(fh)
    for key in sys.argv[2:]:
        value = value[key]
except (OSError, ValueError, LookupError, TypeError) as exc:
    print(f"reportgen-action: {sys.argv[1][-200:]}: no {chr(46).join(sys.argv[2:])} ({type(exc).__name__}); "
          "run this mode on pull_request events", file=sys.stderr)
    sys.exit(2)
print(value)' "$@"
}

pull_request() {
  local event="${GITHUB_EVENT_PATH:?GITHUB_EVENT_PATH is not set}"
  local base_sha pr base="$tmp/reportgen-base" store="$tmp/reportgen-pr-results"
  local comment="$tmp/reportgen-comment.md" gate=0 names scenarios=() extra=()
  base_sha="$(event_field "$event" pull_request base sha)"
  pr="$(event_field "$event" pull_request number)"
  [[ "$base_sha" =~ ^[0-9a-f]{40}([0-9a-f]{24})?$ ]] || refuse "$event: pull_request.base.sha is not a commit id"
  [[ "$pr" =~ ^[1-9][0-9]{0,9}$ ]] || refuse "$event: pull_request.number is not a pull-request number"
  git -C "$workspace" cat-file -e "$base_sha^{commit}" 2>/dev/null || \
    git -C "$workspace" fetch --quiet --depth=1 -- origin "$base_sha"
  rm -rf -- "$base" "$store"
  git -C "$workspace" worktree prune
  git -C "$workspace" worktree add --quiet --detach -- "$base" "$base_sha"
  # the pairs go into a copy of the results branch (never pushed), where `reportgen ab` finds the runner's calibration
  if git -C "$workspace" fetch --quiet -- origin "refs/heads/$branch" 2>/dev/null; then
    git -C "$workspace" worktree add --quiet --detach -- "$store" FETCH_HEAD
  fi
  # Base first, head last: what the environment keeps installed is the head's (the coordinator is head's
  # reportgen); each side's worker imports the package from its own tree (the checkout's root first on sys.path).
  install "$base" || log "the package could not be installed in the base; measuring it as it is"
  install "$workspace"
  names="$(pr_scenarios)"
  mapfile -t scenarios <<< "$names"
  read -r -a extra <<< "${RG_AB_ARGS:-}"
  {
    echo "<!-- reportgen-compare -->"
    local first=1 n=0
    for scenario in "${scenarios[@]}"; do
      [ -n "$scenario" ] || continue
      [ "$first" -eq 1 ] || echo; first=0
      n=$((n + 1))
      local rc=0 out="$tmp/reportgen-ab-$n.md"  # numbered: a checkout's name never becomes a file name
      rm -f -- "$out"
      (cd "$workspace" && reportgen ab "--base=$base" "--head=$workspace" "--scenario=$scenario" "--store=$store" \
        "--output=$out" ${RG_THRESHOLD:+"--threshold=$RG_THRESHOLD"} ${RG_DEVICE:+"--device=$RG_DEVICE"} \
        ${extra[@]+"${extra[@]}"}) || rc=$?
      # 0 no change or faster, 1 regression (or broken in head), 7 inconclusive after the time budget
      if [ "$rc" -eq 0 ] || [ "$rc" -eq 1 ] || [ "$rc" -eq 7 ]; then
        grep -v -F -x "<!-- reportgen-ab -->" "$out" || true
        if [ "$rc" -eq 1 ]; then gate=1; fi
      else
        python -m reportgen.ci.not_compared "$scenario" "$rc"  # the name is the checkout's: escaped
      fi
    done
  } > "$comment"
  git -C "$workspace" worktree remove --force -- "$base"
  [ ! -e "$store/.git" ] || git -C "$workspace" worktree remove --force -- "$store"
  echo "comment=$comment" >> "${GITHUB_OUTPUT:-/dev/null}"
  python -m reportgen.ci.comment --pr "$pr" --body "$comment"
  if [ "$gate" -eq 1 ]; then
    echo "::error::reportgen: a variant is significantly slower, or broken in the head (see the pull-request comment)"
    exit 1
  fi
}

# results_worktree DIR: the results branch checked out in DIR (a first commit of an empty tree when it does not
# exist yet), with a committer for the new runs.
results_worktree() {
  local results="$1" empty
  git -C "$workspace" config user.name >/dev/null || git -C "$workspace" config user.name "github-actions[bot]"
  git -C "$workspace" config user.email >/dev/null || \
    git -C "$workspace" config user.email "41898282+github-actions[bot]@users.noreply.github.com"
  rm -rf -- "$results"
  git -C "$workspace" worktree prune
  if git -C "$workspace" fetch --quiet -- origin "refs/heads/$branch" 2>/dev/null; then
    git -C "$workspace" worktree add --quiet --detach -- "$results" FETCH_HEAD
  else
    empty="$(git -C "$workspace" hash-object -t tree /dev/null)"
    git -C "$workspace" worktree add --quiet --detach -- "$results" \
      "$(git -C "$workspace" commit-tree "$empty" -m 'reportgen results store')"
  fi
}

push() {
  local sha="${GITHUB_SHA:-$(git -C "$workspace" rev-parse HEAD)}"
  local results="$tmp/reportgen-results" site="${RG_SITE_DIR:-$tmp/reportgen-site}"
  results_worktree "$results"
  profile "$workspace" "$results" "${GITHUB_REF_NAME:-main} ${sha:0:7}"
  git -C "$results" add -A -- .
  git -C "$results" commit --quiet -m "reportgen run for $sha"
  push_results "$results"
  (cd "$workspace" && reportgen build "--runs=$results" "--out=$site" ${RG_BASE_URL:+"--base-url=$RG_BASE_URL"})
  local steps_rc=0
  report_steps "$results" || steps_rc=$?
  git -C "$workspace" worktree remove --force -- "$results"
  echo "site=$site" >> "${GITHUB_OUTPUT:-/dev/null}"
  if [ "$steps_rc" -ne 0 ]; then exit "$steps_rc"; fi
}

# calibrate: `reportgen ab --calibrate` of this commit for each scenario, into the results branch. Exit 3 when a
# scenario could not be calibrated (the others are kept), 2 on bad inputs.
calibrate() {
  local sha="${GITHUB_SHA:-$(git -C "$workspace" rev-parse HEAD)}"
  local results="$tmp/reportgen-results" names scenarios=() extra=() scenario failed=0 rc n=0
  results_worktree "$results"
  install "$workspace"
  names="$(pr_scenarios)"
  mapfile -t scenarios <<< "$names"
  read -r -a extra <<< "${RG_AB_ARGS:-}"
  for scenario in "${scenarios[@]}"; do
    [ -n "$scenario" ] || continue
    rc=0 n=$((n + 1))
    local out="$tmp/reportgen-calibration-$n.md"  # numbered: a checkout's name never becomes a file name
    rm -f -- "$out"
    (cd "$workspace" && reportgen ab --calibrate "--base=$workspace" "--scenario=$scenario" "--store=$results" \
      "--output=$out" ${RG_THRESHOLD:+"--threshold=$RG_THRESHOLD"} ${RG_DEVICE:+"--device=$RG_DEVICE"} \
      ${extra[@]+"${extra[@]}"}) || rc=$?
    if [ -f "$out" ]; then print_inert "$(cat -- "$out")"; fi
    if [ "$rc" -ne 0 ]; then
      log "scenario $n could not be calibrated (reportgen ab exit $rc; its message is above)"
      failed=1
    fi
  done
  git -C "$results" add -A -- .
  if ! git -C "$results" diff --cached --quiet; then
    git -C "$results" commit --quiet -m "reportgen calibration for $sha"
    push_results "$results"
  fi
  git -C "$workspace" worktree remove --force -- "$results"
  if [ "$failed" -ne 0 ]; then exit 3; fi
}

# print_inert TEXT: TEXT into the log between stop-commands markers (GitHub's documented way): a line of the
# repository's data that looks like "::error::..." is printed, never run as a workflow command.
print_inert() {
  local token
  token="rg-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
  printf '::stop-commands::%s\n%s\n::%s::\n' "$token" "$1" "$token"
}

# report_steps STORE: each history series and its steps into the log; a new step (the newest run is the first
# to show it) is an error annotation; its status: 1 for a new step with RG_FAIL_ON_STEP=true, else reportgen
# history's.
report_steps() {
  local rc=0 fail="" listing
  [ "${RG_FAIL_ON_STEP:-false}" = true ] && fail="--fail-on-step"
  listing="$(cd "$workspace" && reportgen history "--store=$1" ${fail:+"$fail"})" || rc=$?
  # Names in the listing are the repository's data: between stop-commands markers (GitHub's documented way) a line
  # that looks like "::error::..." is printed, never run as a workflow command.
  print_inert "$listing"
  case "$listing" in
    *"NEW step at run"*)
      echo "::error::reportgen: a new step in the history of main (listed above; marked on the site's history charts)" ;;
  esac
  return "$rc"
}

# push_results DIR: push DIR's HEAD (the new run's commit) to the results branch. Several runners push at
# once: a push that loses the race fetches the branch, rebases the new commit onto it (a run only adds its
# own new folder, so the rebase never conflicts) and tries again, at most RG_PUSH_TRIES times (default 10),
# waiting a random 0..RG_PUSH_BACKOFF_MS*2^try ms (default 500, capped at 30 s) between tries so that
# racing runners spread out. Exit 6 when every try lost.
push_results() {
  local dir="$1" tries="${RG_PUSH_TRIES:-10}" backoff_ms="${RG_PUSH_BACKOFF_MS:-500}" n=1 wait_ms
  case "$tries$backoff_ms" in "" | *[!0-9]*) refuse "RG_PUSH_TRIES, RG_PUSH_BACKOFF_MS: give whole numbers" ;; esac
  until git -C "$dir" push --quiet -- origin "HEAD:refs/heads/$branch" 2>/dev/null; do
    if [ "$n" -ge "$tries" ]; then
      log "the results branch '$branch' moved on at each of $tries pushes; re-run the job (nothing was lost)"
      exit 6
    fi
    wait_ms=$(( backoff_ms << (n < 6 ? n : 6) ))
    wait_ms=$(( wait_ms > 30000 ? 30000 : wait_ms ))
    wait_ms=$(( (RANDOM * 32768 + RANDOM) % (wait_ms + 1) ))
    [ "$wait_ms" -eq 0 ] || sleep "$(( wait_ms / 1000 )).$(printf '%03d' $(( wait_ms % 1000 )))"
    n=$((n + 1))
    git -C "$dir" fetch --quiet -- origin "refs/heads/$branch"
    if ! git -C "$dir" rebase --quiet FETCH_HEAD; then
      git -C "$dir" rebase --abort || true
      log "the new run's commit does not apply on the results branch '$branch'; re-run the job"
      exit 6
    fi
  done
}

# Sourced (by a test) it only defines the functions above.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  case "${1:-}" in
    pull-request) check_inputs; pull_request ;;
    push) check_inputs; push ;;
    calibrate) check_inputs; calibrate ;;
    *) log "unknown mode '${1:-}': use pull-request, push or calibrate"; exit 2 ;;
  esac
fi
