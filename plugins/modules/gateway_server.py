#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: gateway_server
short_description: Read, drain or re-enable engine servers at an HAProxy gateway through its runtime API
version_added: "0.1.0"
author: specdec.serve maintainers (@specdec-serve)
description:
  - Talks to HAProxy's runtime API (the admin-level stats socket the C(specdec.serve.gateway) role configures)
    on the gateway host.
  - O(state=query) returns every server (or the selected ones) with its backend, status, current and total
    sessions; it changes nothing.
  - O(state=drain) sets the selected servers to C(drain) (no new request, the requests in flight finish), then
    waits until their current sessions reach 0, for at most O(timeout) seconds; when that time passes the
    module does not fail but returns RV(timed_out) and a warning naming the servers still busy.
  - O(state=ready) sets the selected servers back to C(ready) and waits, for at most O(up_timeout) seconds,
    until the gateway's health checks see them C(UP); RV(up) says whether they all are.
  - Uses the Python standard library only (a UNIX socket), so the gateway host needs nothing else.
options:
  socket:
    description: Path of HAProxy's admin-level stats socket.
    type: path
    default: /run/haproxy/specdec-admin.sock
  state:
    description: What to do with the selected servers.
    type: str
    choices: [query, drain, ready]
    default: query
  servers:
    description:
      - Server names (C(<inventory host>:<instance>), as the gateway role names them). Servers of these
        names in every backend are selected; names no backend has are ignored (RV(missing) lists them).
    type: list
    elements: str
    default: []
  host:
    description:
      - Select every server of this inventory host (names starting C(<host>:)), in addition to O(servers).
    type: str
  timeout:
    description: Seconds to wait for a drained server's sessions to reach 0 (the drain timeout).
    type: float
    default: 300
  up_timeout:
    description: Seconds to wait, after O(state=ready), for the gateway's health checks to see the servers UP.
    type: float
    default: 120
  interval:
    description: Seconds between polls.
    type: float
    default: 0.5
  wait:
    description: Wait for the sessions to drain (O(state=drain)) or the servers to come UP (O(state=ready)).
    type: bool
    default: true
  missing_ok:
    description:
      - When O(socket) does not exist (HAProxy not installed or not running yet, as on a fleet's first
        converge, where the engines roll out before the gateway is set up), change nothing and return
        RV(running)=false instead of failing. A socket that exists but does not answer still fails.
    type: bool
    default: false
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: In check mode the servers' states are read and the change reported, never set.
  diff_mode:
    support: none
  platform:
    platforms: posix
notes:
  - The collection ships this small module instead of depending on community.general's C(haproxy) module,
    because the collection has no collection dependencies, and the rollout needs the drain's wait on current
    sessions with a reported (not failed) timeout, and the servers selected by host.
'''

EXAMPLES = r'''
- name: Drain a host's engines at the gateway before they restart
  specdec.serve.gateway_server:
    state: drain
    host: spark-01
    timeout: 600
  delegate_to: "{{ item }}"
  loop: "{{ groups['gateways'] }}"

- name: Read the gateway's view of its servers
  specdec.serve.gateway_server:
    state: query
  register: gateway_view
'''

RETURN = r'''
servers:
  description: The selected servers (all for a query without selection) after the change and the wait.
  returned: always
  type: list
  elements: dict
  sample: [{backend: model_gpt-oss-120b, server: "spark-01:gpt-oss-120b", status: DRAIN, admin: drain, sessions: 0,
            total: 42, address: "10.0.0.11:8000", check: "L7OK"}]
missing:
  description: Names in O(servers) that no backend has.
  returned: always
  type: list
  elements: str
timed_out:
  description: The drain timeout passed with sessions still in flight (the servers are listed in the warning).
  returned: always
  type: bool
up:
  description: After O(state=ready), whether every selected server is UP at the gateway.
  returned: always
  type: bool
waited_s:
  description: Seconds spent waiting.
  returned: always
  type: float
running:
  description: Whether the gateway's runtime API was there (false only with O(missing_ok)).
  returned: always
  type: bool
'''

import os
import socket
import stat
import time

from ansible.module_utils.basic import AnsibleModule


def runtime(path, command, timeout=10.0):
    """One command on the runtime API; its whole answer."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(path)
        sock.sendall(command.encode('ascii') + b'\n')
        chunks = []
        while True:
            data = sock.recv(65536)
            if not data:
                break
            chunks.append(data)
    finally:
        sock.close()
    return b''.join(chunks).decode('utf-8', 'replace')


def parse_stat(text):
    """`show stat` CSV: the servers (not FRONTEND/BACKEND rows) as dicts."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines or not lines[0].startswith('# '):
        raise ValueError('unexpected answer to show stat: %r' % text[:200])
    header = lines[0][2:].split(',')
    rows = []
    for line in lines[1:]:
        row = dict(zip(header, line.split(',')))
        if row.get('svname') in ('FRONTEND', 'BACKEND') or row.get('type') not in (None, '2'):
            continue
        rows.append({
            'backend': row.get('pxname'), 'server': row.get('svname'), 'status': row.get('status', ''),
            'sessions': int(row.get('scur') or 0), 'total': int(row.get('stot') or 0),
            'queued': int(row.get('qcur') or 0), 'address': row.get('addr', ''),
            'check': row.get('check_status', ''), 'weight': int(row.get('weight') or 0),
        })
    return rows


# srv_admin_state bits of `show servers state` (HAProxy's SRV_ADMF_*): forced, inherited, config,
# resolution and health-check maintenance; forced and inherited drain.
_MAINT_BITS = 0x01 | 0x02 | 0x04 | 0x20 | 0x40
_DRAIN_BITS = 0x08 | 0x10


def parse_state(text):
    """`show servers state`: {(backend, server): 'ready'|'drain'|'maint'} from srv_admin_state.

    A drained server whose health checks fail shows DOWN in `show stat`, not DRAIN: its admin state
    is read here."""
    out, header = {}, None
    for line in text.splitlines():
        if line.startswith('# '):
            header = line[2:].split()
            continue
        words = line.split()
        if not header or len(words) < len(header) - 2:
            continue
        row = dict(zip(header, words))
        try:
            flags = int(row.get('srv_admin_state', '0'))
        except ValueError:
            continue
        out[(row.get('be_name'), row.get('srv_name'))] = ('maint' if flags & _MAINT_BITS else
                                                          'drain' if flags & _DRAIN_BITS else 'ready')
    return out


def select(rows, names, host):
    chosen = [r for r in rows if r['server'] in names or (host and r['server'].startswith(host + ':'))]
    missing = sorted(set(names) - set(r['server'] for r in rows))
    return chosen, missing


def admin_state(row):
    if row.get('admin'):
        return row['admin']
    status = row['status'].upper()
    if status.startswith('MAINT'):
        return 'maint'
    if status.startswith('DRAIN') or status.startswith('NOLB') or 'DRAIN' in status:
        return 'drain'
    return 'ready'


def main():
    module = AnsibleModule(
        argument_spec=dict(
            socket=dict(type='path', default='/run/haproxy/specdec-admin.sock'),
            state=dict(type='str', choices=['query', 'drain', 'ready'], default='query'),
            servers=dict(type='list', elements='str', default=[]),
            host=dict(type='str'),
            timeout=dict(type='float', default=300),
            up_timeout=dict(type='float', default=120),
            interval=dict(type='float', default=0.5),
            wait=dict(type='bool', default=True),
            missing_ok=dict(type='bool', default=False),
        ),
        supports_check_mode=True,
    )
    p = module.params
    names, host, state = list(p['servers']), p['host'], p['state']

    def read():
        try:
            rows = parse_stat(runtime(p['socket'], 'show stat'))
            admin = parse_state(runtime(p['socket'], 'show servers state'))
        except (OSError, socket.error, ValueError) as exc:
            module.fail_json(msg='cannot read the gateway runtime API at %s: %s' % (p['socket'], exc))
        for row in rows:
            row['admin'] = admin.get((row['backend'], row['server']))
        return rows

    try:
        present = stat.S_ISSOCK(os.stat(p['socket']).st_mode)
    except OSError:
        present = False
    if not present and p['missing_ok']:
        module.exit_json(changed=False, servers=[], missing=names, timed_out=False, up=True, waited_s=0.0,
                         running=False)
    rows = read()
    if state == 'query' and not names and not host:
        module.exit_json(changed=False, servers=rows, missing=[], timed_out=False, up=True, waited_s=0.0, running=True)
    chosen, missing = select(rows, names, host)
    changed = any(admin_state(r) != state for r in chosen) if state != 'query' else False
    result = dict(changed=changed, missing=missing, timed_out=False, up=True, waited_s=0.0, running=True)
    if state == 'query' or module.check_mode:
        module.exit_json(servers=chosen, **result)

    for row in chosen:
        if admin_state(row) != state:
            answer = runtime(p['socket'], 'set server %s/%s state %s' % (row['backend'], row['server'], state)).strip()
            if answer:
                module.fail_json(msg='the gateway refused to set %s/%s %s: %s' % (row['backend'], row['server'],
                                                                                  state, answer), **result)
    start = time.time()
    keys = set((r['backend'], r['server']) for r in chosen)
    now = [r for r in read() if (r['backend'], r['server']) in keys]
    if p['wait'] and state == 'drain':
        deadline = start + p['timeout']
        while any(r['sessions'] > 0 for r in now) and time.time() < deadline:
            time.sleep(p['interval'])
            now = [r for r in read() if (r['backend'], r['server']) in keys]
        busy = ['%s/%s (%d)' % (r['backend'], r['server'], r['sessions']) for r in now if r['sessions'] > 0]
        if busy:
            result['timed_out'] = True
            module.warn('drain timeout of %ss passed with requests still in flight on %s; going on'
                        % (p['timeout'], ', '.join(busy)))
    elif p['wait'] and state == 'ready':
        deadline = start + p['up_timeout']
        while not all(r['status'].upper().startswith('UP') for r in now) and time.time() < deadline:
            time.sleep(p['interval'])
            now = [r for r in read() if (r['backend'], r['server']) in keys]
    result['up'] = all(r['status'].upper().startswith('UP') for r in now)
    result['waited_s'] = round(time.time() - start, 3)
    module.exit_json(servers=now, **result)


if __name__ == '__main__':
    main()
