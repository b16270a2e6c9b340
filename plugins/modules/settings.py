#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Documentation of the settings action plugin (it runs on the controller only)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
module: settings
short_description: Check a role's variables on the controller and return them typed
version_added: "0.1.0"
author: specdec.serve maintainers (@specdec-serve)
description:
  - Reads the options of every entry point of the role's argument spec (C(meta/argument_specs.yml)) and the variables of
    the same names, converts each the way Ansible's argument spec converts it (C("false") from
    C(-e) becomes C(false), C("8000,8001") becomes C([8000, 8001])), and applies the collection's
    policy, namely ranges and upper bounds of numbers, names that become file or unit names, normalised
    absolute host paths, https URLs unless the role's C(*_allow_http) option is set, and no control
    character in any string.
  - Fails with every refused variable named, with its value and what is allowed, before any host is
    touched. The value of a C(no_log) option is never shown and never returned.
  - Returns the typed values keyed without the role prefix (C(firewall_ipv6) as C(ipv6)); the roles
    register the result as C(_<role>_settings) and read only those values in their tasks and templates.
  - Where the role has a planner for the entry point (C(PLANNERS) in C(plugins/plugin_utils/_roles/<role>.py)),
    it also returns the role's plan, decided once from the typed values, as C(plan); the role's tasks apply it.
    A plan the planner refuses fails the task with every reason named, before any host is touched; its warnings
    are the task's warnings.
  - A default that the inventory decides (C(INVENTORY_DEFAULTS) of the role's module, for its C(main) entry, as the
    firewall's engine ports, allowed networks, host ports and links) is filled in where the setting is unset, before
    the checks, which read it as they read a given value; one that cannot be made fails the task naming the setting.
options:
  role:
    description: The role whose settings to check. Default the role of the task.
    type: str
  entry:
    description:
      - The role's entry point whose planner decides the plan. Most are the role's C(tasks_from) entry points;
        an entry that judges what a host reported (a probe's output, a file's state) is named after what it judges.
    type: str
    default: main
  reported:
    description:
      - What the host reported, for an entry whose planner judges it (a probe's output, a stat's result); the planner
        reads it as data and names it in any refusal.
    type: raw
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.flow
  - specdec.serve.attributes.controller
attributes:
  check_mode:
    details: Reads variables only.
notes:
  - Secrets are checked but not returned; tasks read the secret variable itself, which must already
    be of its type (it is not converted, so there is no second copy of it).
'''

EXAMPLES = r'''
- name: Check the firewall settings on the controller
  specdec.serve.settings:
  register: _firewall_settings
  tags: [always]

- name: Use a typed value
  ansible.builtin.debug:
    msg: "{{ 'open' if _firewall_settings.open_engine_ports else 'allow-list' }}"
'''

RETURN = r'''
_settings:
  description:
    - Every non-secret option of the entry point, typed, as a top-level key named without the role
      prefix (for example C(open_engine_ports) for C(firewall_open_engine_ports)).
  returned: success
  type: raw
plan:
  description: The role's plan for the entry point, where the role has a planner for it.
  returned: success, where the role has a planner for the entry point
  type: dict
'''
