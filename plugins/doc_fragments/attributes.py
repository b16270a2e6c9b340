# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The attributes the collection's modules share; a module's own attribute keys (its details) win."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):

    # A module that runs on the host and only reads (with ansible.builtin.action_common_attributes).
    READ_ONLY = r'''
attributes:
  check_mode:
    support: full
    details: The module only reads, so check mode runs it unchanged.
  diff_mode:
    support: none
  platform:
    platforms: posix
'''

    # An action plugin that runs on the controller only (with ansible.builtin.action_common_attributes and
    # ansible.builtin.action_common_attributes.flow).
    CONTROLLER = r'''
attributes:
  action:
    support: full
    details: Runs on the controller only.
  async:
    support: none
  bypass_host_loop:
    support: none
  check_mode:
    support: full
  diff_mode:
    support: none
  platform:
    platforms: all
'''
