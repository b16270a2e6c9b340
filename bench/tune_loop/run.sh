#!/usr/bin/env bash
# The tune loop end to end on the lab (molecule fleet, about 15 minutes), then its figures.
set -euo pipefail
cd "$(dirname "$0")/../.."
make --no-print-directory molecule SCENARIOS=fleet
.venv/bin/python bench/tune_loop/report.py --out bench/tune_loop/results.json
