#!/usr/bin/env bash
# Installs the Temporal CLI, whose `temporal server start-dev` is the dev
# server the Temporal integration tests start (internal/durable), pinned,
# built from source with go install into a cache folder:
#   ${AOT_TEMPORAL_CLI_DIR:-$HOME/.cache/aot/temporal}/temporal
# A binary already there at the pinned version is kept (go version -m tells
# its version); another version is replaced. The first build takes about 8
# minutes and 250 MB. The tests find the binary there (or through
# AOT_TEMPORAL_CLI, or on PATH); with AOT_REQUIRE_TEMPORAL=1 they fail
# without it instead of skipping.
set -euo pipefail
DIR=${AOT_TEMPORAL_CLI_DIR:-$HOME/.cache/aot/temporal}
MODULE=github.com/temporalio/cli
VERSION=v1.5.1
export GOTOOLCHAIN=local
command -v go >/dev/null || { echo "temporal-cli: go is needed" >&2; exit 1; }
bin=$DIR/temporal
if [ -x "$bin" ] && go version -m "$bin" 2>/dev/null | grep -Eq "^[[:space:]]+mod[[:space:]]+$MODULE[[:space:]]+$VERSION([[:space:]]|$)"; then
  exit 0
fi
mkdir -p "$DIR"
log=$DIR/install.log
echo "temporal-cli: building $MODULE/cmd/temporal@$VERSION into $DIR (about 8 minutes the first time; log $log)"
# Built beside, then moved: an interrupted build leaves no binary behind.
tmp=$(mktemp -d "$DIR/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
GOBIN=$tmp go install "$MODULE/cmd/temporal@$VERSION" >"$log" 2>&1 ||
  { tail -n 30 "$log" >&2; echo "temporal-cli: go install failed" >&2; exit 1; }
mv -f "$tmp/temporal" "$bin"
"$bin" --version
