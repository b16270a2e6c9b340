#!/usr/bin/env bash
# Build the execution environment from execution-environment.yml with ansible-builder, on the lab's
# Debian base (lab/ee-base: no registry is needed), and check the image: ansible-doc reads a plugin
# of the collection inside it, and the controller's Python packages import.
#   scripts/ee.sh [TAG]        (default specdec-serve-ee:ci; `make ee` runs it)
# Needs docker and the lab's core image (`python3 lab/lab.py images`), and ansible-galaxy on PATH.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
tag=${1:-specdec-serve-ee:ci}
base=specdec-lab/ee-base:latest
builder_version=3.2.0
venv="$top/lab/.cache/ee-venv"
started=$(date +%s)

if [ "$("$venv/bin/ansible-builder" --version 2>/dev/null)" != "$builder_version" ]; then
  echo "==> installing ansible-builder $builder_version into $venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q "ansible-builder==$builder_version" 2>&1 | { grep -v '^WARNING: Location' || true; }
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "==> $base (lab/ee-base on specdec-lab/core)"
mkdir "$work/base"
cp "$top/lab/ee-base/Dockerfile" "$work/base/"
ca=/etc/ssl/certs/ca-certificates.crt
if [ -s "$ca" ]; then cp "$ca" "$work/base/build-machine-ca.crt"; else : > "$work/base/build-machine-ca.crt"; fi
docker build -q -t "$base" "$work/base" >/dev/null

echo "==> the collection tarball"
mkdir "$work/ee"
ansible-galaxy collection build "$top" --output-path "$work/ee" >/dev/null
cp "$top/execution-environment.yml" "$work/ee/"

echo "==> ansible-builder build -t $tag"
cd "$work/ee"
"$venv/bin/ansible-builder" build -f execution-environment.yml -t "$tag" --container-runtime docker \
  --build-arg "EE_BASE_IMAGE=$base" --build-arg PKGMGR=/usr/bin/apt-get -v 1 \
  || { echo "ansible-builder failed; rerun with -v 3 for the build log" >&2; exit 1; }
built=$(date +%s)

echo "==> checks inside $tag"
# spec_config is a filter (ansible-doc without -t looks for a module of that name)
doc=$(docker run --rm "$tag" ansible-doc -t filter specdec.serve.spec_config 2>&1) || true
grep -q "FILTER.*specdec.serve.spec_config" <<<"$doc" || { echo "ansible-doc did not show specdec.serve.spec_config:" >&2; echo "$doc" | head -20 >&2; exit 1; }
grep -q "speculative" <<<"$doc" || { echo "ansible-doc specdec.serve.spec_config shows no option list" >&2; exit 1; }
docker run --rm "$tag" ansible-doc specdec.serve.engine_health >/dev/null
docker run --rm "$tag" ansible-doc -t lookup specdec.serve.image_archive >/dev/null
docker run --rm "$tag" python3.11 -c 'import jinja2, yaml, matplotlib; print("controller packages import")'
docker run --rm "$tag" ansible-galaxy collection list specdec.serve
echo "==> $tag built in $((built - started)) s and checked in $(( $(date +%s) - built )) s"
