#!/usr/bin/env bash
# The base is the last revision before the controller-side settings layer; pass another with --base.
set -euo pipefail
cd "$(dirname "$0")/../.."
exec python3 bench/noop_converge/run.py --base "${1:-4924e84}" "${@:2}"
