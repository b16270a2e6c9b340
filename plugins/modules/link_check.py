#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: link_check
short_description: Check a stack link on the host, and that it reaches every peer at the full MTU
version_added: "0.1.0"
author: specdec.serve maintainers (@specdec-serve)
description:
  - Reads the link interface with C(ip -json addr show dev IFACE) and reports what differs from its plan
    (O(interface) absent, down, without carrier, another MTU than O(mtu), O(address) not configured).
  - With O(peers), sends each peer C(ping -M do) echo requests whose packets are exactly O(mtu) bytes, so a
    peer (or a switch between) with a smaller MTU fails the check instead of passing on fragments.
  - Polls for up to O(wait) seconds until the interface matches its plan and every peer answers, since a
    network manager applies a changed file a moment after it is told.
  - With O(fail_on_problem) it fails naming each problem and each peer that did not answer, with ping's own
    last line; otherwise it returns them.
  - Changes nothing on the host; it always returns C(changed=false). Uses the Python standard library and
    iproute2's C(ip) and iputils' C(ping).
options:
  interface:
    description: The link interface.
    type: str
    required: true
  address:
    description: The host's link address with its prefix length (C(192.168.100.10/24)).
    type: str
    required: true
  mtu:
    description: The link MTU.
    type: int
    required: true
  peers:
    description: The peers' link addresses to ping (none, no ping).
    type: list
    elements: str
    default: []
  wait:
    description: Seconds to wait for the link to match its plan and the peers to answer.
    type: int
    default: 0
  fail_on_problem:
    description: Fail when a problem remains after O(wait).
    type: bool
    default: false
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - specdec.serve.attributes.read_only
attributes:
  check_mode:
    details:
      - The check only reads, so check mode runs it too.
notes:
  - The C(specdec.serve.stack_link) role runs it twice, as a probe (a link that differs from its file is
    reapplied) and as the verification after every run.
'''

EXAMPLES = r'''
- name: Verify the link of spark-01 reaches spark-02 with 9000-byte packets
  specdec.serve.link_check:
    interface: enp1s0f0np0
    address: 192.168.100.10/24
    mtu: 9000
    peers: [192.168.100.11]
    wait: 30
    fail_on_problem: true
'''

RETURN = r'''
state:
  description: The interface as C(ip) shows it.
  returned: always
  type: dict
  sample: {exists: true, admin_up: true, carrier: true, operstate: UP, mtu: 9000, addresses: [192.168.100.10/24]}
problems:
  description: What differs from the plan, one sentence each (empty when the link is as planned).
  returned: always
  type: list
  elements: str
  sample: ["enp1s0f0np0: MTU 1500, want 9000"]
peers:
  description: Each pinged peer, C({address, ok, summary}) (C(summary) is ping's last line).
  returned: always
  type: list
  elements: dict
  sample: [{address: 192.168.100.11, ok: true, summary: "rtt min/avg/max/mdev = 0.071/0.080/0.090/0.009 ms"}]
'''

import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.specdec.serve.plugins.module_utils import link_state


def _check(module, params):
    ip = module.get_bin_path('ip', required=True)
    rc, out, err = module.run_command([ip, '-json', 'addr', 'show', 'dev', params['interface']])
    state = link_state.parse_link(out if rc == 0 else '', params['interface'])
    found = link_state.problems(state, params['interface'], params['address'], params['mtu'])
    peers = []
    if params['peers'] and not found:
        ping = module.get_bin_path('ping', required=True)
        version = link_state.family(params['address'])
        payload = link_state.ping_payload(params['mtu'], version)
        for peer in params['peers']:
            argv = link_state.ping_argv(peer, params['interface'], payload, version)
            rc, out, err = module.run_command([ping] + argv[1:])
            peers.append({'address': peer, 'ok': rc == 0, 'summary': link_state.ping_summary(out + '\n' + err)})
    return state, found, peers


def main():
    module = AnsibleModule(
        argument_spec=dict(
            interface=dict(type='str', required=True),
            address=dict(type='str', required=True),
            mtu=dict(type='int', required=True),
            peers=dict(type='list', elements='str', default=[]),
            wait=dict(type='int', default=0),
            fail_on_problem=dict(type='bool', default=False),
        ),
        supports_check_mode=True,
    )
    params = module.params
    deadline = time.monotonic() + max(0, params['wait'])
    while True:
        state, found, peers = _check(module, params)
        silent = [p for p in peers if not p['ok']]
        if (not found and not silent) or time.monotonic() >= deadline:
            break
        time.sleep(1)
    result = dict(changed=False, state=state, problems=found, peers=peers)
    if params['fail_on_problem'] and (found or silent):
        words = list(found) + ['peer %s did not answer %d-byte packets with the don\'t-fragment bit on %s: %s'
                               % (p['address'], params['mtu'], params['interface'], p['summary']) for p in silent]
        module.fail_json(msg='stack link: ' + '; '.join(words), **result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
