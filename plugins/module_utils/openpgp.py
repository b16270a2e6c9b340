# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""OpenPGP keys as gpg lists them: the fingerprints of the primary keys in `gpg --show-keys --with-colons`."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def primary_fingerprints(colons):
    """The fingerprints of the primary keys (`pub` records, not `sub`) in gpg's --with-colons output, upper case.

    A key is trusted by these: a subkey's fingerprint is never one a user pins."""
    out, primary = [], False
    for line in colons.splitlines():
        fields = line.split(':')
        if fields[0] in ('pub', 'sub'):
            primary = fields[0] == 'pub'
        elif fields[0] == 'fpr' and primary and len(fields) > 9:
            out.append(fields[9].upper())
            primary = False
    return out


def unpinned(fingerprints, pinned):
    """Why a key with these primary fingerprints is not trusted by the pinned list ('' when it is): it holds
    no key at all, or a primary key that is not pinned."""
    pinned_set = set(p.upper() for p in pinned)
    if not fingerprints:
        return 'it holds no OpenPGP key'
    others = [f for f in fingerprints if f not in pinned_set]
    if others:
        return 'it holds the key(s) %s, not among the pinned %s' % (', '.join(others), ', '.join(sorted(pinned_set)))
    return ''
