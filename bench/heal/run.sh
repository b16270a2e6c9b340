#!/usr/bin/env bash
# The heal end to end on the lab (molecule fleet, whose last tests wedge one engine three times), then its figures.
set -euo pipefail
cd "$(dirname "$0")/../.."
make --no-print-directory molecule SCENARIOS=fleet
.venv/bin/python bench/heal/report.py --out bench/heal/results.json
