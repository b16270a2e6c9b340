#!/usr/bin/env bash
# The base is the revision the controller-CPU target was set against (the last before the settings
# layer: 143 tasks per host); pass another as the first argument.
set -euo pipefail
cd "$(dirname "$0")/../.."
exec python3 bench/noop_converge/run.py --profile --base "${1:-4924e84}" "${@:2}"
