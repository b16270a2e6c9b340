#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: daemon_json_state
short_description: Read what the merge of docker's daemon.json depends on, in one round trip
version_added: "0.1.0"
author: specdec.serve maintainers (@specdec-serve)
description:
  - The probe of the C(docker_host) role's C(daemon_json) entry point. It reads, and never changes, the
    C(*.json) fragments of O(fragment_dir) (regular files only), the C(daemon.json) written before the role
    (only while O(fragment_dir) does not exist, to be adopted as fragment C(00-preexisting)), the docker
    service's C(ExecStart) (C(systemctl show)), and whether C(dockerd --help) offers C(--validate).
  - It also reads the text of O(path) and the mode and owner of O(path), O(fragment_dir) and every fragment,
    so that the controller can tell whether anything is to be written at all.
  - The merge and its checks are taken on the controller from this result (the planner of the
    R(docker_host role,ansible_collections.specdec.serve.docker_host_role)).
options:
  path:
    description: The merged file docker reads.
    type: path
    default: /etc/docker/daemon.json
  fragment_dir:
    description: The directory of the fragments.
    type: path
    default: /etc/docker/daemon.json.d
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - specdec.serve.attributes.read_only
seealso:
  - module: ansible.builtin.copy
'''

EXAMPLES = r'''
- name: Read the daemon.json fragments, the docker service's flags and dockerd's options
  specdec.serve.daemon_json_state:
    path: /etc/docker/daemon.json
    fragment_dir: /etc/docker/daemon.json.d
  register: _docker_host_state
'''

RETURN = r'''
fragment_dir_exists:
  description: Whether O(fragment_dir) exists.
  returned: always
  type: bool
preexisting:
  description:
    - The text of O(path) when O(fragment_dir) does not exist yet and O(path) does (the hand-written file the
      role adopts), else null.
  returned: always
  type: str
fragments:
  description: File name without C(.json) to the file's text, for every regular C(*.json) file of O(fragment_dir).
  returned: always
  type: dict
  sample: {"10-docker-host": "{\n  \"log-driver\": \"json-file\"\n}\n"}
current:
  description: The text of O(path) when it is a regular file, else null.
  returned: always
  type: str
modes:
  description: C(mode:owner:group) (mode in octal, as C(0644)) of O(path), O(fragment_dir) and every fragment read,
    by path; a path that does not exist is not listed.
  returned: always
  type: dict
  sample: {"/etc/docker/daemon.json": "0644:root:root", "/etc/docker/daemon.json.d": "0755:root:root"}
exec_start:
  description: The docker service's C(ExecStart) as C(systemctl show) gives it; empty without the unit.
  returned: always
  type: str
validate:
  description: Whether C(dockerd --help) lists C(--validate) (docker 23 and later).
  returned: always
  type: bool
'''

import grp
import os
import pwd
import stat

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_text

# A fragment is configuration, not data: anything larger is refused rather than read.
MAX_FRAGMENT_BYTES = 1024 * 1024


def read_text(module, path):
    with open(path, 'rb') as handle:
        data = handle.read(MAX_FRAGMENT_BYTES + 1)
    if len(data) > MAX_FRAGMENT_BYTES:
        module.fail_json(msg='%s is larger than %d bytes; it is not a daemon.json fragment' % (path, MAX_FRAGMENT_BYTES))
    return to_text(data, errors='surrogate_or_strict')


def mode_owner(path):
    """'0644:root:root' for a path (following no link), or None when it does not exist."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    try:
        owner = pwd.getpwuid(st.st_uid).pw_name
    except KeyError:
        owner = str(st.st_uid)
    try:
        group = grp.getgrgid(st.st_gid).gr_name
    except KeyError:
        group = str(st.st_gid)
    return '%04o:%s:%s' % (stat.S_IMODE(st.st_mode), owner, group)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type='path', default='/etc/docker/daemon.json'),
            fragment_dir=dict(type='path', default='/etc/docker/daemon.json.d'),
        ),
        supports_check_mode=True,
    )
    path, fragment_dir = module.params['path'], module.params['fragment_dir']
    dir_exists = os.path.isdir(fragment_dir)
    current = read_text(module, path) if os.path.isfile(path) else None
    preexisting = current if not dir_exists else None
    modes = {}
    for where in (path, fragment_dir):
        if mode_owner(where) is not None:
            modes[where] = mode_owner(where)
    fragments = {}
    if dir_exists:
        for name in sorted(os.listdir(fragment_dir)):
            full = os.path.join(fragment_dir, name)
            if name.endswith('.json') and stat.S_ISREG(os.lstat(full).st_mode):
                fragments[name[:-len('.json')]] = read_text(module, full)
                modes[full] = mode_owner(full)
    exec_start = ''
    systemctl = module.get_bin_path('systemctl')
    if systemctl:
        rc, out, dummy = module.run_command([systemctl, 'show', 'docker', '--property=ExecStart'])
        if rc == 0:
            exec_start = out.strip().partition('=')[2]
    validate = False
    dockerd = module.get_bin_path('dockerd')
    if dockerd:
        dummy, out, err = module.run_command([dockerd, '--help'])
        validate = '--validate' in out + err
    module.exit_json(changed=False, fragment_dir_exists=dir_exists, preexisting=preexisting, fragments=fragments,
                     current=current, modes=modes, exec_start=exec_start, validate=validate)


if __name__ == '__main__':
    main()
