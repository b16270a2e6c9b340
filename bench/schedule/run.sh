#!/usr/bin/env bash
# Load schedules against fixed draft lengths on the real engine: per load level, the schedule as served.
set -euo pipefail
cd "$(dirname "$0")/../.."
exec .venv/bin/python bench/schedule/run.py "$@"
