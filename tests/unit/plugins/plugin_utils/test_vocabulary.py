# -*- coding: utf-8 -*-
"""vocabulary: the plain name, ports, durations, container paths and the one wording of a refusal."""

from __future__ import annotations

import pytest

from ansible_collections.specdec.serve.plugins.plugin_utils import _vocabulary as V


@pytest.mark.parametrize('value, ok', [
    ('a', True), ('gpt-oss-120b', True), ('a.b_c-d', True), ('A' * 128, True),
    # one limit for every plain name: 128, what a file or unit name needs (API key names, once 64, too)
    ('A' * 129, False), ('-a', False), ('.a', False), ('_a', False), ('a b', False), ('a/b', False), ('', False),
    ('a\n', False), (None, False), (1, False),
])
def test_a_plain_name(value, ok):
    assert V.is_name(value) is ok


def test_ports_and_durations():
    assert V.is_port(1) and V.is_port(65535) and not V.is_port(0) and not V.is_port(65536) and not V.is_port(True)
    assert V.seconds('500ms') == 0.5 and V.seconds('2h') == 7200
    for bad in ('5', '1m30s', '', None, 5):
        with pytest.raises(ValueError):
            V.seconds(bad)


def test_the_wording_of_a_refusal():
    assert V.refusal('gateway_port', 0, 'must be ' + V.PORT_WORDS) == 'gateway_port: 0 must be a port number from 1 to 65535'
    assert V.refusal('x_key', 'secret', 'must be set', secret=True) == 'x_key: (value hidden) must be set'
    assert V.refusal('x', 'a' * 200, 'is too long').startswith("x: 'aaa") and '...' in V.refusal('x', 'a' * 200, '')
