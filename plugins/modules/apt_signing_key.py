#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: apt_signing_key
short_description: An apt repository's signing key, trusted by its fingerprint
version_added: "0.1.0"
author: specdec.serve maintainers (@specdec-serve)
description:
  - Keeps the OpenPGP key an apt source names in C(signed-by) at O(dest), trusted by fingerprint rather than by the
    origin that serves it. A stored key whose primary keys are all among O(fingerprints) is kept and O(url) is not
    asked. Otherwise the key is fetched from O(url), listed with C(gpg --show-keys --with-colons), and written
    (atomically, mode O(mode), owner root) only when it holds a key and every primary key in it is pinned; any
    other key fails the task, naming the URL, the fingerprints it holds and the pinned ones, and O(dest) is left
    as it was.
  - So a repository URL, even one answering over plain http or a mirror's, cannot swap in another key. If a
    repository rotates its key, pin the new fingerprint.
  - Used by the C(docker_host) role (Docker's repository) and the C(container_toolkit) role (NVIDIA's).
requirements:
  - gpg (Debian's C(gnupg) or C(gpg) package) on the host.
options:
  url:
    description: Where the armoured (or binary) key is published, e.g. C(https://download.docker.com/linux/debian/gpg).
    type: str
    required: true
  dest:
    description: The keyring file the apt source's C(signed-by) names (its directory is made, mode 0755, when missing).
    type: path
    required: true
  fingerprints:
    description: The fingerprints (40 hex digits) of the primary keys to trust; at least one.
    type: list
    elements: str
    required: true
  pinned_by:
    description: The variable the O(fingerprints) come from, which a refusal names (e.g. C(docker_host_docker_repo_key_fingerprints)).
    type: str
    default: fingerprints
  mode:
    description: The mode of O(dest).
    type: raw
    default: "0644"
  timeout:
    description: Seconds the fetch may take.
    type: int
    default: 30
  gpg:
    description: The gpg executable.
    type: path
    default: gpg
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: The key is fetched and checked in check mode too (a key that is not pinned fails there as well); nothing is written.
  diff_mode:
    support: full
    details: The fingerprints of the stored key before and after, not the key itself.
  platform:
    platforms: debian
seealso:
  - module: ansible.builtin.deb822_repository
'''

EXAMPLES = r'''
- name: Keep Docker's signing key, trusted by its fingerprint
  specdec.serve.apt_signing_key:
    url: https://download.docker.com/linux/debian/gpg
    dest: /etc/apt/keyrings/docker.asc
    fingerprints: [9DC858229FC7DD38854AE2D88D81803C0EBFCD88]
'''

RETURN = r'''
fingerprints:
  description: The primary fingerprints of the key now at O(dest) (in check mode, of the key that would be).
  returned: success
  type: list
  elements: str
  sample: [9DC858229FC7DD38854AE2D88D81803C0EBFCD88]
fetched:
  description: Whether O(url) was asked (the stored key was absent or not a pinned one).
  returned: success
  type: bool
'''

import os
import re
import shutil
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import fetch_url

from ansible_collections.specdec.serve.plugins.module_utils.openpgp import primary_fingerprints, unpinned

FINGERPRINT = re.compile(r'^[0-9A-Fa-f]{40}$')


def show_keys(module, data):
    """The primary fingerprints gpg lists in `data` (bytes), in a throw-away home so no keyring is touched."""
    home = tempfile.mkdtemp(prefix='specdec-gpg-')
    try:
        rc, out, err = module.run_command([module.params['gpg'], '--homedir', home, '--batch', '--show-keys', '--with-colons'],
                                          data=data, binary_data=True)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    return primary_fingerprints(out) if rc == 0 else []


def main():
    module = AnsibleModule(
        argument_spec=dict(
            url=dict(type='str', required=True),
            dest=dict(type='path', required=True),
            fingerprints=dict(type='list', elements='str', required=True),
            pinned_by=dict(type='str', default='fingerprints'),
            mode=dict(type='raw', default='0644'),
            timeout=dict(type='int', default=30),
            gpg=dict(type='path', default='gpg'),
        ),
        supports_check_mode=True,
    )
    dest, url, pinned = module.params['dest'], module.params['url'], module.params['fingerprints']
    bad = [f for f in pinned if not FINGERPRINT.match(f)]
    if not pinned or bad:
        module.fail_json(msg='%s: %s; each must be 40 hex digits, at least one' % (module.params['pinned_by'], bad or 'empty'))

    before = []
    if os.path.isfile(dest):
        with open(dest, 'rb') as handle:
            before = show_keys(module, handle.read())
        if not unpinned(before, pinned):
            module.exit_json(changed=False, fingerprints=before, fetched=False)

    resp, info = fetch_url(module, url, timeout=module.params['timeout'])
    if info.get('status') != 200 or resp is None:
        module.fail_json(msg='could not fetch the signing key from %s: %s %s' % (url, info.get('status'), info.get('msg', '')))
    data = resp.read()
    after = show_keys(module, data)
    why = unpinned(after, pinned)
    if why:
        module.fail_json(msg='%s: the signing key at %s is not stored in %s: %s. If the repository rotated its key, pin the '
                             'new fingerprint.' % (module.params['pinned_by'], url, dest, why), fingerprints=after)

    diff = {'before': '\n'.join(before) + ('\n' if before else ''), 'after': '\n'.join(after) + '\n',
            'before_header': dest + ' (primary fingerprints)', 'after_header': dest + ' (primary fingerprints)'}
    if not module.check_mode:
        directory = os.path.dirname(dest) or '.'
        if not os.path.isdir(directory):
            os.makedirs(directory, 0o755)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix='.' + os.path.basename(dest) + '.')
        with os.fdopen(fd, 'wb') as handle:
            handle.write(data)
        module.set_mode_if_different(tmp, module.params['mode'], False)
        module.set_owner_if_different(tmp, 'root', False)
        module.set_group_if_different(tmp, 'root', False)
        module.atomic_move(tmp, dest)
    module.exit_json(changed=True, fingerprints=after, fetched=True, diff=diff)


if __name__ == '__main__':
    main()
