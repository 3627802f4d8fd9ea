#!/usr/bin/env bash
# Builds the release extension: target/release/librediscluster_session.so
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT"
cargo build --release --locked
log "built $EXT_SO ($(du -k "$EXT_SO" | cut -f1) KiB)"
