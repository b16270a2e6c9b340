#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Documentation of the fleet_report action plugin (it runs on the controller only)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
module: fleet_report
short_description: Build the fleet view from every host's collected facts and write it as JSON, on the controller
version_added: "0.1.0"
author: specdec.serve maintainers (@specdec-serve)
description:
  - The report step of the C(fleet_view) role. Reads the C(fleet_view_host) fact of every host of the view (set by
    the role's C(collect) step), builds one row per host and instance, and writes the JSON to
    C(<report_dir>/<report_name>.json) on the controller, whole or not at all.
  - A host without the fact (unreachable, or failed before it was collected) is a row that says C(not checked); a
    host with no instance says C(nothing deployed).
  - With C(prometheus_url) in the settings, asks that Prometheus for live acceptance length and tokens/s
    (C(specdec:acceptance_length:rate), C(specdec:generated_tokens:rate), C(specdec:acceptance_length:expected)) and
    adds them beside the last sweep's figures; a Prometheus that cannot be read fails the task, naming the query.
  - With the gateways' query results (M(specdec.serve.gateway_server) C(state=query)), adds each gateway's view of
    each engine.
  - Everything runs in the controller's Python; no module runs on any host and none is started on the controller.
options:
  settings:
    description: The registered result of M(specdec.serve.settings) for the C(fleet_view) role.
    type: dict
    required: true
  gateways:
    description: The C(results) of the gateways' M(specdec.serve.gateway_server) queries (one per gateway).
    type: list
    elements: dict
    default: []
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.flow
  - specdec.serve.attributes.controller
attributes:
  check_mode:
    details: The report describes the hosts and changes none of them, so check mode writes it as well.
'''

EXAMPLES = r'''
- name: Write the fleet view
  specdec.serve.fleet_report:
    settings: "{{ _fleet_view_settings }}"
    gateways: "{{ _fleet_view_gateways.results | default([]) }}"
  run_once: true
  register: _fleet_view_written

- name: Show the fleet
  ansible.builtin.debug:
    msg: "{{ _fleet_view_written.lines }}"
  run_once: true
'''

RETURN = r'''
path:
  description: The JSON file written on the controller.
  returned: success
  type: str
lines:
  description: A heading, then the table, one line per item.
  returned: success
  type: list
  elements: str
report:
  description: What the JSON holds - C(title), C(generated_at), C(hosts), C(rows) and, with gateways, C(gateways).
  returned: success
  type: dict
ansible_facts:
  description: C(fleet_view_report), the same as RV(report).
  returned: success
  type: dict
'''
