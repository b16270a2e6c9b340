# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The container_toolkit role's settings policy: what its argument spec cannot say (ranges, patterns, paths, the checks
that read another setting), one entry per setting, applied by the settings engine (plugin_utils/_settings.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from typing import Any

from ansible_collections.specdec.serve.plugins.plugin_utils._checks import (
    apt_version,
    each,
    fingerprint,
    host_path,
    image,
    name,
    no_climb,
    no_dotdot_name,
    non_empty,
    package,
)


POLICY: dict[str, Any] = {
    'container_toolkit_repo_url': {'url': 'container_toolkit_allow_http'},
    'container_toolkit_repo_key_url': {'url': 'container_toolkit_allow_http'},
    'container_toolkit_keyring': [host_path],
    'container_toolkit_repo_key_fingerprints': [non_empty, each(fingerprint)],
    'container_toolkit_preferences_file': [host_path],
    'container_toolkit_version': [apt_version],
    'container_toolkit_packages': [non_empty, each(package)],
    'container_toolkit_daemon_json_fragment': [no_dotdot_name],
    'container_toolkit_runtime_name': [name],
    'container_toolkit_runtime_path': [no_climb],
    'container_toolkit_smoke_test_image': [image],
    'container_toolkit_runtime_test_image': [image],
}
