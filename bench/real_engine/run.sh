#!/usr/bin/env bash
# The real engine by draft length (n-gram, suffix), start-up, memory, acceptance three ways.
set -euo pipefail
cd "$(dirname "$0")/../.."
exec .venv/bin/python bench/real_engine/run.py "$@"
