#!/bin/sh
# Run the emulator unit tests inside an emulator image, so the server code is exercised with the
# image's Debian aiohttp (3.8.x) rather than the virtualenv's. The test tools (pytest, openai) come
# from the project virtualenv, mounted read-only and placed after Debian's packages.
#   lab/emulator/check_image.sh [IMAGE] [VENV]
set -eu
IMAGE=${1:-specdec-lab/tensorrt-llm-emulator:1.2.0rc6}
VENV=${2:-.venv}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SITE=$(ls -d "$VENV"/lib/python3*/site-packages | head -n 1)
SITE=$(cd "$SITE" && pwd)
exec docker run --rm -v "$ROOT":/repo:ro -v "$SITE":/venv:ro -w /repo -e PYTHONDONTWRITEBYTECODE=1 \
    "$IMAGE" python3 -c "
import sys
sys.path.insert(0, '/venv'); import typing_extensions; sys.path.pop(0)  # the newer one, as openai needs it
import aiohttp, aiohttp.web, yaml  # Debian's, imported before the virtualenv joins sys.path
sys.path.append('/venv')
print('aiohttp', aiohttp.__version__, 'from', aiohttp.__file__)
import pytest
sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', 'lab/tests/test_emulator_cli.py',
                      'lab/tests/test_emulator_server.py', 'lab/tests/test_emulator_clock.py']))"
