# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The stack_trust role's settings policy: what its argument spec cannot say (ranges, patterns, paths, the checks
that read another setting), one entry per setting, applied by the settings engine (plugin_utils/_settings.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from typing import Any

from ansible_collections.specdec.serve.plugins.plugin_utils._checks import (
    host_path,
    own_dir,
    port,
)


POLICY: dict[str, Any] = {
    'stack_trust_dir': [host_path, own_dir('stack_trust_dir', config=True)],
    'stack_trust_ssh_port': [port],
}
