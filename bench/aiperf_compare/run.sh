#!/usr/bin/env bash
# serve_bench against aiperf on the same real engine, rate and lengths (see run.py).
# aiperf is installed, pinned, into bench/aiperf_compare/.venv (ignored by git) on the first run.
set -euo pipefail
cd "$(dirname "$0")/../.."
AIPERF_VERSION=${AIPERF_VERSION:-0.13.0}
venv=bench/aiperf_compare/.venv
if ! "$venv/bin/aiperf" --version 2>/dev/null | grep -qx "$AIPERF_VERSION"; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "aiperf==$AIPERF_VERSION" \
        > "$venv/install.log" 2>&1 || { tail -20 "$venv/install.log"; exit 1; }
fi
exec .venv/bin/python bench/aiperf_compare/run.py "$@"
