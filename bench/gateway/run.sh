#!/bin/bash
# The front door's benchmarks (bench/gateway/HISTORY.md):
#   run.py      TTFT and output tokens/s through the gateway against direct, at concurrency 1 and 16;
#   rollout.py  a draft-length rollout's wall time with draining at the gateway against without.
# run.py needs HAProxy on this machine: `haproxy` on PATH or /usr/sbin/haproxy, else the
# distribution's package (what the role installs on a gateway host), unpacked under bench/gateway/.cache.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
py=$repo/.venv/bin/python
haproxy=$(command -v haproxy || true)
[ -z "$haproxy" ] && [ -x /usr/sbin/haproxy ] && haproxy=/usr/sbin/haproxy
if [ -z "$haproxy" ]; then
  root=$here/.cache/root
  if [ ! -x "$root/usr/sbin/haproxy" ]; then
    mkdir -p "$here/.cache" && cd "$here/.cache"
    apt-get download haproxy liblua5.3-0 libopentracing-c-wrapper0 libopentracing1
    for deb in ./*.deb; do dpkg-deb -x "$deb" root; done
    cd "$repo"
  fi
  haproxy=$root/usr/sbin/haproxy
  export LD_LIBRARY_PATH="$root/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
"$haproxy" -v | head -1
"$py" "$here/run.py" --haproxy "$haproxy" --rounds 3
# HAProxy on a core of its own, as on a gateway host; then arrivals on their own schedule at 16 in flight
if [ "$(nproc)" -ge 2 ]; then
  "$py" "$here/run.py" --haproxy "$haproxy" --rounds 3 --cpus 0 --gateway-cpus 1
  "$py" "$here/run.py" --haproxy "$haproxy" --rounds 3 --cpus 0 --gateway-cpus 1 --open-loop-rate 12
fi
"$py" "$here/rollout.py" --hosts 2 --rounds 3
