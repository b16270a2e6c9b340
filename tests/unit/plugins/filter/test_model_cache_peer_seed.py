"""model_cache_peer_seed: the model cache's seed is a fact of the inventory, never of the play (a run limited
with -l picks the seed a full run picks), and the firewall computes the same seed from the same owner."""

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.specdec.serve.plugins.filter.network import FilterModule, model_cache_peer_seed
from ansible_collections.specdec.serve.plugins.plugin_utils import _model_cache as model_cache

GROUPS = {'all': ['gw-01', 'mon-01', 'spark-02', 'spark-01', 'b200-01'], 'gateways': ['gw-01'],
          'monitoring': ['mon-01'], 'spark-nodes': ['spark-02', 'spark-01'], 'b200-nodes': ['b200-01']}


def peer(**extra):
    return dict({'model_cache_source': 'peer'}, **extra)


def test_the_filter_is_registered():
    assert FilterModule().filters()['model_cache_peer_seed'] is model_cache_peer_seed


def test_the_default_is_the_first_caching_host_of_the_inventory_in_peer_mode():
    # gateways and monitoring hosts come first in the inventory, in peer mode (group_vars/all), and cache nothing
    hostvars = dict((h, peer()) for h in GROUPS['all'])
    assert model_cache_peer_seed(hostvars, GROUPS) == 'spark-02'
    # a host in hub mode is skipped
    hostvars['spark-02'] = {'model_cache_source': 'hub'}
    assert model_cache_peer_seed(hostvars, GROUPS) == 'spark-01'


def test_the_default_does_not_depend_on_the_play():
    # the filter is given no play hosts at all; the same inventory gives the same seed on every host
    hostvars = dict((h, peer()) for h in GROUPS['all'])
    assert set(model_cache.peer_seed(hostvars, GROUPS, h) for h in ('spark-02', 'spark-01', 'b200-01')) == {'spark-02'}


def test_without_a_host_in_peer_mode_in_the_inventory_the_first_caching_host():
    # peer mode set by a play's vars, which other hosts' variables do not show
    assert model_cache_peer_seed({}, GROUPS) == 'spark-02'
    assert model_cache_peer_seed({}, {'all': ['gw-01'], 'gateways': ['gw-01']}) == ''


def test_a_hosts_seed_is_its_own_setting_else_the_default():
    hostvars = dict((h, peer()) for h in GROUPS['all'])
    hostvars['b200-01'] = peer(model_cache_peer_seed='b200-01')
    assert model_cache_peer_seed(hostvars, GROUPS, 'b200-01') == 'b200-01'
    assert model_cache_peer_seed(hostvars, GROUPS, 'spark-01') == 'spark-02'
    assert model_cache.peers_of(hostvars, GROUPS, 'spark-02') == ['spark-01']
    assert model_cache.peers_of(hostvars, GROUPS, 'b200-01') == []


def test_the_default_reads_no_seed_setting():
    """It is model_cache_peer_seed's own default: it must not read that variable of any host (a loop)."""
    class Guard(dict):
        def __contains__(self, key):
            assert key != 'model_cache_peer_seed'
            return dict.__contains__(self, key)
    hostvars = dict((h, Guard(peer())) for h in GROUPS['all'])
    assert model_cache_peer_seed(hostvars, GROUPS) == 'spark-02'


@pytest.mark.parametrize('args, said', [
    (({}, ['spark-01']), 'expects the inventory groups'),
    (([], GROUPS), 'expects hostvars'),
    (({}, GROUPS, 3), 'host must be a host name'),
])
def test_bad_arguments_are_refused(args, said):
    with pytest.raises(AnsibleFilterError, match=said):
        model_cache_peer_seed(*args)
