#!/usr/bin/env bash
# Proofs that the suite tells the truth whatever the day and whatever the order of its files
# (docs/build.md, "Proofs"), on the embedded database:
#   scripts/suite-proofs.sh any-day   the whole suite with the clock a year ahead, then a year back
#   scripts/suite-proofs.sh alone     each test file in a run of its own (two runs at a time)
#   scripts/suite-proofs.sh order     every file in one worker by path, then in the reverse order
#   scripts/suite-proofs.sh busy      the whole suite as CI's first lane runs it, beside stress-ng --cpu 4
#   scripts/suite-proofs.sh all       the four, one after another
# Each prints what failed and exits non-zero if anything did. `any-day` needs faketime (Debian's
# package of that name): it shifts the clock of every process of the run, the servers the tests
# start included, so the embedded database, the service and the tests see one shifted clock.
set -uo pipefail
cd "$(dirname "$0")/.."

logs=$(mktemp -d /tmp/parley-proofs.XXXXXX)
failed=()
echo "logs in $logs"
npm run pretest --silent >/dev/null

run() {
  local name=$1
  shift
  echo "== $name"
  local started=$SECONDS
  if "$@" >"$logs/$name.log" 2>&1; then
    echo "   passed in $((SECONDS - started)) s"
  else
    failed+=("$name")
    echo "   FAILED in $((SECONDS - started)) s: $(grep -E '^ (FAIL|×)' "$logs/$name.log" | sed 's/\x1b\[[0-9;]*m//g' | head -20)"
  fi
}

# The monotonic clock stays true: timers measure real time whatever day the calendar says.
shifted() {
  FAKETIME_DONT_FAKE_MONOTONIC=1 faketime -f "$1" npx vitest run --reporter=dot
}

any_day() {
  command -v faketime >/dev/null || { echo "faketime is not installed (apt-get install faketime)"; exit 2; }
  run "clock-a-year-ahead" shifted +365d
  run "clock-a-year-back" shifted -365d
}

alone() {
  echo "== each file alone"
  local started=$SECONDS
  find test -name '*.test.ts' | sort >"$logs/files"
  # Two at a time, each file in a vitest run of its own; a failed file's name goes to the list.
  xargs -P 2 -I{} sh -c 'npx vitest run "{}" >"$0/$(echo {} | tr / _).log" 2>&1 || echo "{}" >>"$0/alone-failed"' "$logs" <"$logs/files"
  if [ -s "$logs/alone-failed" ]; then
    failed+=("alone: $(tr '\n' ' ' <"$logs/alone-failed")")
    echo "   FAILED: $(cat "$logs/alone-failed")"
  else
    echo "   $(wc -l <"$logs/files") files passed alone in $((SECONDS - started)) s"
  fi
}

# Four CPU hogs on this two-core machine: every test waits for what it awaits, never for a time,
# so the suite passes as it does quiet, only slower.
busy() {
  command -v stress-ng >/dev/null || { echo "stress-ng is not installed (apt-get install stress-ng)"; exit 2; }
  stress-ng --cpu 4 --timeout 3h >/dev/null 2>&1 &
  local hogs=$!
  run "beside-stress-ng-cpu-4" env CI=true FAKETIME_DONT_FAKE_MONOTONIC=1 faketime -f +365d npx vitest run --reporter=dot
  kill "$hogs"
}

order() {
  run "one-worker-by-path" env TEST_FILE_ORDER=forward npx vitest run --reporter=dot --maxWorkers=1
  run "one-worker-reversed" env TEST_FILE_ORDER=reverse npx vitest run --reporter=dot --maxWorkers=1
}

case "${1:-all}" in
  any-day) any_day ;;
  alone) alone ;;
  order) order ;;
  busy) busy ;;
  all) any_day; alone; order; busy ;;
  *) echo "usage: scripts/suite-proofs.sh any-day|alone|order|busy|all"; exit 2 ;;
esac

if [ ${#failed[@]} -gt 0 ]; then
  printf 'failed: %s\n' "${failed[@]}"
  exit 1
fi
echo "all passed"
