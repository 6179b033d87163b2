#!/usr/bin/env bash
# Whole-process timings of the aot CLI on generated state files.
#
#   bench/cli.sh                      # sizes 10 1000 10000 100000, 11 runs each
#   SIZES="1000 100000" RUNS=21 bench/cli.sh
#
# For every size it writes a state file with bench/gen (a layered DAG, the
# first half resolved with bindings), then runs each command RUNS times on a
# fresh copy of that file and prints a Markdown table: median and fastest
# wall time, and the peak RSS of one more run (GNU time, when installed),
# also as a multiple of the file size. Targets (docs/PERFORMANCE.md): a whole
# call under 10 ms at 1,000 atoms and under 500 ms at 100,000 atoms; peak
# memory under 20x the file size.
set -euo pipefail

cd "$(dirname "$0")/.."
export GOTOOLCHAIN=local
SIZES=${SIZES:-"10 1000 10000 100000"}
RUNS=${RUNS:-11}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

mkdir -p bin
go build -o bin/aot ./cmd/aot
go build -o "$work/gen" ./bench/gen
aot=$PWD/bin/aot

gnutime=""
if [ -x /usr/bin/time ] && /usr/bin/time -f %M true >/dev/null 2>&1; then
	gnutime=/usr/bin/time
fi

now_ns() { date +%s%N; }

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# run_case SIZE LABEL ARGS...: time "aot ARGS --state-file F" on fresh copies.
run_case() {
	local n=$1 label=$2
	shift 2
	local src="$work/state-$n.md" file="$work/run.md" times=() rc=0
	for ((r = 0; r < RUNS; r++)); do
		cp "$src" "$file"
		local t0 t1
		t0=$(now_ns)
		"$aot" "$@" --state-file "$file" >"$work/out" 2>&1 || rc=$?
		t1=$(now_ns)
		times+=($(((t1 - t0) / 1000)))
		if [ "$rc" -ge 2 ]; then
			echo "bench: aot $* exited $rc:" >&2
			head -5 "$work/out" >&2
			return 1
		fi
		rc=0
	done
	local med min rss="n/a" ratio="n/a"
	med=$(printf '%s\n' "${times[@]}" | median)
	min=$(printf '%s\n' "${times[@]}" | sort -n | head -1)
	if [ -n "$gnutime" ]; then
		cp "$src" "$file"
		$gnutime -f %M -o "$work/rss" "$aot" "$@" --state-file "$file" >/dev/null 2>&1 || true
		local kb size
		kb=$(tail -1 "$work/rss")
		size=$(stat -c %s "$src")
		rss=$(awk -v k="$kb" 'BEGIN {printf "%.1f", k / 1024}')
		ratio=$(awk -v k="$kb" -v s="$size" 'BEGIN {printf "%.1fx", k * 1024 / s}')
	fi
	printf '| %s | %s | `aot %s` | %s | %s | %s | %s |\n' "$n" "$(size_of "$src")" "$label" \
		"$(awk -v u="$med" 'BEGIN {printf "%.1f", u / 1000}')" \
		"$(awk -v u="$min" 'BEGIN {printf "%.1f", u / 1000}')" "$rss" "$ratio"
}

size_of() { awk -v s="$(stat -c %s "$1")" 'BEGIN {if (s < 1048576) printf "%.1f KB", s / 1024; else printf "%.1f MB", s / 1048576}'; }

# floor CMD...: the median wall time of CMD (ms), the baseline a call is
# measured against in the same run.
floor() {
	local times=() t0 t1
	for ((r = 0; r < RUNS; r++)); do
		t0=$(now_ns)
		"$@" >/dev/null 2>&1 || true
		t1=$(now_ns)
		times+=($(((t1 - t0) / 1000)))
	done
	printf '%s\n' "${times[@]}" | median | awk '{printf "%.1f", $1 / 1000}'
}

echo "aot CLI, $(nproc) cores, $(go version | cut -d' ' -f3), median of $RUNS runs"
echo
echo "floor in this run: a process start (/bin/true) $(floor /bin/true) ms; aot's own start (aot --version) $(floor "$aot" --version) ms"
echo
echo "| atoms | file | command | median ms | min ms | peak RSS MB | RSS / file |"
echo "|---:|---:|---|---:|---:|---:|---:|"
for n in $SIZES; do
	"$work/gen" -atoms "$n" -o "$work/state-$n.md"
	run_case "$n" "state --json" state --json
	run_case "$n" "atom set A$n in_progress" atom set "A$n" in_progress
	run_case "$n" "bind A1 --summary S --artifacts a,b" bind A1 --summary "Bench summary" --artifacts a.go,b.go
	run_case "$n" "validate --json" validate --json
	run_case "$n" "gate --json" gate --json
done
