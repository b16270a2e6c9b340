#!/usr/bin/env bash
# The same converge on an aarch64 and an x86_64 lab host in one run (see run.py).
set -euo pipefail
cd "$(dirname "$0")/../.."
exec .venv/bin/python bench/aarch64/run.py "$@"
