#!/usr/bin/env bash
# Installs the agent CLIs the integration tests drive (Claude Code, Codex,
# Gemini CLI) from the npm registry, at pinned versions, into a cache folder:
#   ${AOT_AGENT_CLIS:-$HOME/.cache/aot/agent-clis}/{claude,codex,gemini}
# Each package carries its native binary, so no postinstall runs. A version
# already installed is kept; a changed pin reinstalls. About 40 s and 870 MB
# the first time. The tests find the binaries there (or through
# AOT_CLAUDE_BIN, AOT_CODEX_BIN, AOT_GEMINI_BIN).
set -euo pipefail
DIR=${AOT_AGENT_CLIS:-$HOME/.cache/aot/agent-clis}
PINS=(
  "claude @anthropic-ai/claude-code@2.1.330"
  "codex @openai/codex@0.169.0"
  "gemini @google/gemini-cli@0.61.0"
)
command -v npm >/dev/null || { echo "agent-clis: npm is needed (Node.js 20 or later)" >&2; exit 1; }
mkdir -p "$DIR"
for pin in "${PINS[@]}"; do
  set -- $pin
  name=$1 pkg=$2
  if [ "$(cat "$DIR/$name/.pinned" 2>/dev/null)" = "$pkg" ]; then
    continue
  fi
  rm -rf "$DIR/$name"
  mkdir -p "$DIR/$name"
  echo "agent-clis: installing $pkg into $DIR/$name"
  npm install --prefix "$DIR/$name" --no-audit --no-fund --loglevel=error "$pkg" >"$DIR/$name.log" 2>&1 ||
    { cat "$DIR/$name.log" >&2; echo "agent-clis: npm install $pkg failed" >&2; exit 1; }
  echo "$pkg" >"$DIR/$name/.pinned"
done
