#!/usr/bin/env bash
# Emulated token timing at concurrency 1, 8, 64 and the speedup curve over draft lengths.
set -euo pipefail
cd "$(dirname "$0")/../.."
exec python3 bench/emulator_clock/run.py "$@"
