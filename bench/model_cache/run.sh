#!/usr/bin/env bash
# No-op re-check of a cached gpt-oss-120b-sized model against hashing it; upstream bytes hub vs peer.
set -euo pipefail
cd "$(dirname "$0")/../.."
exec python3 bench/model_cache/bench_model_cache.py "$@"
