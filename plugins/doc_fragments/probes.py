# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Options that modules of the same kind share, with their argument specs beside their code:
an engine's OpenAI-compatible endpoint (module_utils/bench_client.ENDPOINT_ARGS) and a throw-away
container of an instance's image (module_utils/image_requirements.IMAGE_PROBE_ARGS)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):

    # serve_bench, output_probe: the endpoint they send requests to (each documents its own path)
    ENDPOINT = r'''
options:
  url:
    description: Base URL of the server (scheme, host, port, optional path prefix).
    type: str
    default: http://127.0.0.1:8000
  model:
    description: Model name sent in each request. When omitted, the first model of C(GET /v1/models).
    type: str
  api_key:
    description: Bearer token sent as C(Authorization), if the server requires one.
    type: str
'''

    # engine_check, image_requirements: the instance's image, run once by the docker CLI
    IMAGE_PROBE = r'''
options:
  instance:
    description:
      - The instance name, for the messages.
    type: str
    required: true
  image:
    description:
      - The image reference of the instance (its tag), for the messages; run when O(image_id) is empty.
    type: str
    required: true
  image_id:
    description:
      - The image ID the instance's unit runs (C(sha256:...)); the probe runs this exact image.
      - Empty runs O(image).
    type: str
    default: ""
  docker_bin:
    description:
      - The docker CLI.
    type: path
    default: /usr/bin/docker
  python:
    description:
      - The Python interpreter inside the image (the entrypoint of the probe).
    type: str
    default: python3
'''
