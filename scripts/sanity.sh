#!/usr/bin/env bash
# ansible-test sanity on the collection, placed under ansible_collections/specdec/serve in a
# temporary directory. The lab, molecule scenarios, unit tests and benches are not part of the
# built collection (galaxy.yml build_ignore) and are left out here too.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
# ansible-test's shellcheck test needs the program; without it that test is skipped.
if ! command -v shellcheck >/dev/null 2>&1; then
  echo "==> installing shellcheck"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq shellcheck >/dev/null
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
dest="$work/ansible_collections/specdec/serve"
mkdir -p "$dest"
cd "$top"
git ls-files -co --exclude-standard \
  | grep -v -E '^(lab|molecule|bench|collections|tests/unit|scripts/tests|\.ci)/' \
  | while read -r f; do [ -e "$f" ] && printf '%s\0' "$f"; done \
  | xargs -0 cp --parents -t "$dest"
# ansible-test pins its own linters (pylint, pycodestyle, ...): give them a venv of their own,
# with the same ansible-core as the test venv, so they never disturb it.
venv="$top/.sanity-venv"
core=$(python3 -c 'import ansible; print(ansible.__version__)')
if [ ! -x "$venv/bin/ansible-test" ] || [ "$("$venv/bin/python" -c 'import ansible; print(ansible.__version__)')" != "$core" ]; then
  echo "==> creating $venv with ansible-core $core"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q "ansible-core==$core"
fi
# ansible-test bootstraps pip in its per-test venvs with a script it downloads from its own CI
# host; where that host is out of reach, the local equivalent (ensurepip + pip) is put in its cache.
pip_version=$("$venv/bin/python" -c 'from ansible_test._internal.python_requirements import get_venv_packages as g; from types import SimpleNamespace as N; print(g(N(version="3"))["pip"])')
bootstrap="$HOME/.ansible/test/cache/get_pip_${pip_version//./_}.py"
[ -e "$bootstrap" ] || { mkdir -p "$(dirname "$bootstrap")"; cp "$top/scripts/get_pip_local.py" "$bootstrap"; }
# The docs site's own lint (the markup and references of every plugin's and role's docs), with the
# same ansible-doc as the sanity tests; antsibull-docs goes into the same venv, pinned.
antsibull_docs=2.28.0
if [ "$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("antsibull-docs"))' 2>/dev/null)" != "$antsibull_docs" ]; then
  echo "==> installing antsibull-docs $antsibull_docs into $venv"
  "$venv/bin/pip" install -q "antsibull-docs==$antsibull_docs" 2>&1 | { grep -v '^WARNING: Location' || true; }
fi
echo "==> antsibull-docs lint-collection-docs --plugin-docs"
docs_lint=0
PATH="$venv/bin:$PATH" antsibull-docs lint-collection-docs --plugin-docs "$dest" || docs_lint=$?
cd "$dest"
git init -q && git add -A >/dev/null
PATH="$venv/bin:$PATH" ansible-test sanity --local --requirements --python "$("$venv/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')" "$@"
[ "$docs_lint" -eq 0 ] || { echo "antsibull-docs lint-collection-docs failed (its errors are above)" >&2; exit "$docs_lint"; }
