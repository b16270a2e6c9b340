# -*- coding: utf-8 -*-
# Copyright: (c) 2026, specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: image_archive
author: specdec.serve maintainers (@specdec-serve)
version_added: "0.1.0"
short_description: The image ID each tag of a docker save archive loads as, without loading it
description:
  - Reads C(manifest.json) of a C(docker save) archive on the controller and returns, per archive, a
    mapping of image tag to image ID (C(sha256:<hex>)), the ID C(docker load) gives that tag.
  - Reads both layouts docker writes (the legacy one, and the OCI one of Docker 25 and later). Only the tar
    headers are read and the layers are skipped (seeked over), so the cost does not grow with the layers' size.
  - The role P(specdec.serve.inference_server#role) uses it to copy and load an archive only when a host lacks one of
    its images, or holds another image behind the same tag.
options:
  _terms:
    description: Paths of uncompressed C(docker save) archives on the controller.
    type: list
    elements: path
    required: true
"""

EXAMPLES = r"""
- name: Which image IDs the archive holds
  ansible.builtin.debug:
    msg: "{{ lookup('specdec.serve.image_archive', '/srv/images/trtllm-1.2.0rc6.tar') }}"
  # {"nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc6": "sha256:9f4c..."}
"""

RETURN = r"""
_raw:
  description: One mapping per archive, image tag to image ID.
  type: list
  elements: dict
"""

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.specdec.serve.plugins.plugin_utils._image_archive import ImageArchiveError, read_archive


class LookupModule(LookupBase):

    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        try:
            return [read_archive(term) for term in terms]
        except ImageArchiveError as exc:
            raise AnsibleLookupError(str(exc))
