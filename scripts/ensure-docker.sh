#!/usr/bin/env bash
# Make sure a docker engine answers on this machine: install the distribution package when
# missing, and start dockerd (via systemd when it is PID 1, by hand otherwise).
set -euo pipefail

say() { printf '==> %s\n' "$*"; }
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

if docker info >/dev/null 2>&1; then
  say "docker engine answers ($(docker version --format '{{.Server.Version}}'))"
  exit 0
fi

need=()
command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
command -v iptables >/dev/null 2>&1 || need+=(iptables)
command -v ssh >/dev/null 2>&1 || need+=(openssh-client)
if [ "${#need[@]}" -gt 0 ]; then
  say "installing ${need[*]} from the distribution archive"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi

if [ "$(ps -p 1 -o comm= 2>/dev/null)" = "systemd" ]; then
  say "starting docker.service"
  $SUDO systemctl start docker
else
  say "no systemd here: starting dockerd in the background (log: /var/log/dockerd.log)"
  $SUDO sh -c 'nohup dockerd >/var/log/dockerd.log 2>&1 &'
fi

for _ in $(seq 1 60); do
  if docker info >/dev/null 2>&1; then
    say "docker engine ready ($(docker version --format '{{.Server.Version}}'))"
    exit 0
  fi
  sleep 1
done
echo "docker engine did not answer within 60 s; see /var/log/dockerd.log" >&2
exit 1
