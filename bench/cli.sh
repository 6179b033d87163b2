#!/usr/bin/env bash
# Whole-process timings of the aot CLI on generated state files, against
# floors timed in the same run.
#
#   bench/cli.sh                      # sizes 10 1000 10000 100000, 11 runs each
#   SIZES="1000 100000" RUNS=21 bench/cli.sh
#
# Floors (bench/floor): a Go hello-world, and a Go program that reads the
# state file and counts its atoms. Each run of a command is paired with a
# run of its floor, so that a busy machine slows both alike.
#
# For every size it writes a state file with bench/gen (a layered DAG, the
# first half resolved with bindings), then runs each command RUNS times on a
# fresh copy of that file and prints a Markdown table: median and fastest
# wall time, the median as a multiple of the read-the-file floor and (at
# 1,000 atoms and below) of `aot --version`, each run paired with a run of
# those, and the peak RSS of one more run
# (GNU time, when installed), also as a multiple of the file size. Targets
# (docs/PERFORMANCE.md): `aot --version` within 2x of a hello-world; a call at
# 1,000 atoms within 2x of `aot --version`; `aot state --json` at 100,000 atoms
# within 15x of the read floor and under 100 MiB; bin/aot under 30 MB.
set -euo pipefail

cd "$(dirname "$0")/.."
export GOTOOLCHAIN=local
SIZES=${SIZES:-"10 1000 10000 100000"}
RUNS=${RUNS:-11}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

mkdir -p bin
CGO_ENABLED=0 go build -o bin/aot ./cmd/aot # as make build does
go build -o "$work/gen" ./bench/gen
go build -o "$work/floor" ./bench/floor
aot=$PWD/bin/aot
floorbin=$work/floor

gnutime=""
if [ -x /usr/bin/time ] && /usr/bin/time -f %M true >/dev/null 2>&1; then
	gnutime=/usr/bin/time
fi

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# ms MICROSECONDS: as milliseconds with one decimal.
ms() { awk -v u="$1" 'BEGIN {printf "%.1f", u / 1000}'; }

# ratio A B: A / B with one decimal and an x.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.1fx", a / b; else print "n/a"}'; }

# time_us CMD...: sets took to the wall time of one run of CMD, in
# microseconds (no subshell around the run).
time_us() {
	local t0=${EPOCHREALTIME/[.,]/}
	"$@" >/dev/null 2>&1 || true
	took=$((${EPOCHREALTIME/[.,]/} - t0))
}

# run_case SIZE LABEL ARGS...: time "aot ARGS --state-file F" on fresh
# copies, each run paired with a run of the read floor on the same file.
run_case() {
	local n=$1 label=$2
	shift 2
	local src="$work/state-$n.md" file="$work/run.md" times=() floors=() versions=() rc=0
	for ((r = 0; r < RUNS; r++)); do
		cp "$src" "$file"
		time_us "$floorbin" "$file"
		floors+=("$took")
		if [ "$n" -le 1000 ]; then
			time_us "$aot" --version
			versions+=("$took")
		fi
		local t0=${EPOCHREALTIME/[.,]/}
		"$aot" "$@" --state-file "$file" >"$work/out" 2>&1 || rc=$?
		times+=($((${EPOCHREALTIME/[.,]/} - t0)))
		if [ "$rc" -ge 2 ]; then
			echo "bench: aot $* exited $rc:" >&2
			head -5 "$work/out" >&2
			return 1
		fi
		rc=0
	done
	local med min fmed rss="n/a" rratio="n/a" vs_version="-"
	med=$(printf '%s\n' "${times[@]}" | median)
	min=$(printf '%s\n' "${times[@]}" | sort -n | head -1)
	fmed=$(printf '%s\n' "${floors[@]}" | median)
	if [ "$n" -le 1000 ]; then
		vs_version=$(ratio "$med" "$(printf '%s\n' "${versions[@]}" | median)")
	fi
	if [ -n "$gnutime" ]; then
		cp "$src" "$file"
		$gnutime -f %M -o "$work/rss" "$aot" "$@" --state-file "$file" >/dev/null 2>&1 || true
		local kb size
		kb=$(tail -1 "$work/rss")
		size=$(stat -c %s "$src")
		rss=$(awk -v k="$kb" 'BEGIN {printf "%.1f", k / 1024}')
		rratio=$(awk -v k="$kb" -v s="$size" 'BEGIN {printf "%.1fx", k * 1024 / s}')
	fi
	printf '| %s | %s | `aot %s` | %s | %s | %s (%s ms) | %s | %s | %s |\n' "$n" "$(size_of "$src")" "$label" \
		"$(ms "$med")" "$(ms "$min")" "$(ratio "$med" "$fmed")" "$(ms "$fmed")" "$vs_version" "$rss" "$rratio"
}

size_of() { awk -v s="$(stat -c %s "$1")" 'BEGIN {if (s < 1048576) printf "%.1f KB", s / 1024; else printf "%.1f MB", s / 1048576}'; }

# The start floors, interleaved run by run: a Go hello-world and aot's own
# start, `aot --version` (what `aot version` prints), the cheapest whole
# command there is.
hello=() version=()
for ((r = 0; r < 3 * RUNS; r++)); do
	time_us "$floorbin"
	hello+=("$took")
	time_us "$aot" --version
	version+=("$took")
done
hello_us=$(printf '%s\n' "${hello[@]}" | median)
version_us=$(printf '%s\n' "${version[@]}" | median)

echo "aot CLI, $(nproc) cores, $(go version | cut -d' ' -f3), median of $RUNS runs; uptime: $(uptime | sed 's/.*load average/load average/')"
echo
echo "bin/aot: $(awk -v s="$(stat -c %s "$aot")" 'BEGIN {printf "%.1f MB", s / 1048576}')"
echo "start, median of $((3 * RUNS)) interleaved runs: Go hello-world $(ms "$hello_us") ms; \`aot --version\` $(ms "$version_us") ms ($(ratio "$version_us" "$hello_us") the hello-world)"
echo
echo "| atoms | file | command | median ms | min ms | vs read floor (floor median) | vs aot --version | peak RSS MB | RSS / file |"
echo "|---:|---:|---|---:|---:|---:|---:|---:|---:|"
for n in $SIZES; do
	"$work/gen" -atoms "$n" -o "$work/state-$n.md"
	run_case "$n" "state --json" state --json
	run_case "$n" "atom set A$n in_progress" atom set "A$n" in_progress
	run_case "$n" "bind A1 --summary S --artifacts a,b" bind A1 --summary "Bench summary" --artifacts a.go,b.go
	run_case "$n" "validate --json" validate --json
	run_case "$n" "gate --json" gate --json
done
