#!/usr/bin/env bash
# Whole-process timings of `aot hook` beside a bare Go process start.
#
#   bench/hooks.sh                    # 10, 1,000 and 10,000 atoms, 21 runs each
#   SIZES="10000" RUNS=41 bench/hooks.sh
#
# For every size it writes a running loop with bench/gen into a project's
# .claude/aot-loop-state.md, then times each case RUNS times (median, ms)
# and prints it as a multiple of the median start of a tiny Go binary built
# here (func main() {}). Cases with nothing to decide: a foreign session's
# tool call, a loop that is not running. Cases that read the state: the
# owning session's Stop with stop_hook_active (no decision: no progress
# since the previous stop), its tool call (approved) and its Stop (a block,
# written through Store.UpdateControl, on a fresh copy each run). Each hook
# case runs twice: through `bin/aot hook`, and through bin/aot-hook
# (cmd/aot-hook: the same answers from a binary that links only the hooks
# and the state contract; aot plugin install uses it when it is on PATH).
# Targets (docs/PERFORMANCE.md): within 3x a bare start when nothing is
# decided, within 15x when the state must be read.
set -euo pipefail

cd "$(dirname "$0")/.."
export GOTOOLCHAIN=local
SIZES=${SIZES:-"10 1000 10000"}
RUNS=${RUNS:-21}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

mkdir -p bin
go build -o bin/aot ./cmd/aot
go build -o "$work/gen" ./bench/gen
aot=$PWD/bin/aot

mkdir -p "$work/bare"
printf 'package main\n\nfunc main() {}\n' >"$work/bare/main.go"
printf 'module bare\n\ngo 1.26\n' >"$work/bare/go.mod"
(cd "$work/bare" && go build -o "$work/barebin" .)

go build -o bin/aot-hook ./cmd/aot-hook


now_ns() { date +%s%N; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# timed PREP STDIN CMD...: the median wall time in µs of CMD with STDIN,
# running the shell snippet PREP before each run (untimed).
timed() {
	local prep=$1 stdin=$2
	shift 2
	local times=()
	for ((r = 0; r < RUNS; r++)); do
		eval "$prep"
		local t0 t1
		t0=$(now_ns)
		"$@" <"$stdin" >"$work/out" 2>"$work/err" || true
		t1=$(now_ns)
		times+=($(((t1 - t0) / 1000)))
	done
	printf '%s\n' "${times[@]}" | median
}

proj=$work/proj
owner='{"client":"claude","session_id":"S1","claimed_at":"2026-11-23T12:00:00Z","how":"start"}'
echo '{"session_id":"S1","cwd":"'"$proj"'","hook_event_name":"Stop","stop_hook_active":true}' >"$work/active.json"
echo '{"session_id":"S1","cwd":"'"$proj"'","hook_event_name":"Stop","stop_hook_active":false}' >"$work/stop.json"
echo '{"session_id":"S2","cwd":"'"$proj"'","hook_event_name":"PreToolUse","tool_name":"Read","tool_input":{"file_path":"'"$proj"'/a"}}' >"$work/foreign.json"
echo '{"session_id":"S1","cwd":"'"$proj"'","hook_event_name":"PreToolUse","tool_name":"Read","tool_input":{"file_path":"'"$proj"'/a"}}' >"$work/own.json"

echo "| atoms | case | decision | binary | median ms | x bare |"
echo "|---:|---|---|---|---:|---:|"
for n in $SIZES; do
	mkdir -p "$proj/.claude/aot-loop"
	"$work/gen" -atoms "$n" -o "$work/state-$n.md"
	sed 's/^  status: running$/  status: stopped/' "$work/state-$n.md" >"$work/stopped-$n.md"
	reset="cp $work/state-$n.md $proj/.claude/aot-loop-state.md; echo '$owner' > $proj/.claude/aot-loop/session.json"
	stopped="cp $work/stopped-$n.md $proj/.claude/aot-loop-state.md"
	eval "$reset"
	bare=$(timed : "$work/active.json" "$work/barebin")
	printf '| %s | bare Go process | | | %.2f | 1.0x |\n' "$n" "$(echo "$bare / 1000" | bc -l)"
	for bin in aot aot-hook; do
		if [ "$bin" = aot ]; then run=("$aot" hook); else run=("$PWD/bin/aot-hook"); fi
		row() { # LABEL DECISION PREP STDIN ARGS...
			local label=$1 decision=$2 prep=$3 stdin=$4
			shift 4
			local us
			us=$(timed "$prep" "$stdin" "${run[@]}" "$@")
			printf '| %s | %s | %s | %s | %.2f | %.1fx |\n' "$n" "$label" "$decision" "$bin" "$(echo "$us / 1000" | bc -l)" "$(echo "$us / $bare" | bc -l)"
		}
		row "claude stop, owner, stop_hook_active" "none" "$reset" "$work/active.json" claude stop
		row "claude pre-tool-use, foreign session" "none" "$reset" "$work/foreign.json" claude pre-tool-use
		row "claude stop, loop stopped" "none" "$stopped" "$work/stop.json" claude stop
		row "claude pre-tool-use, owner, Read" "allow" "$reset" "$work/own.json" claude pre-tool-use
		row "claude stop, owner" "block" "$reset" "$work/stop.json" claude stop
	done
	grep -q block "$work/out" || { echo "bench: the owner's stop did not block:" >&2; cat "$work/out" "$work/err" >&2; exit 1; }
done
