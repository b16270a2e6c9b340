"""The firewall's unit on a host with docker and on one without (a gateway, a monitoring host).

With docker the unit is bound to docker.service and loads DOCKER-USER and the host-input chain, byte for byte
as it always was (a converged engine host must not change); without docker it loads the host-input chain only,
wanted by multi-user.target and ordered before network-pre.target, so it loads at boot before the network."""

import os

import jinja2
import pytest

from ansible_collections.specdec.serve.plugins.filter.quoting import quote_for

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..'))
SETTINGS = {'rules_dir': '/etc/specdec/firewall', 'iptables_restore': '/usr/sbin/iptables-restore',
            'ip6tables_restore': '/usr/sbin/ip6tables-restore'}
JUMP = {4: '/usr/sbin/iptables -w -C INPUT -j SPECDEC-INPUT 2>/dev/null || /usr/sbin/iptables -w -I INPUT 1 -j SPECDEC-INPUT',
        6: '/usr/sbin/ip6tables -w -C INPUT -j SPECDEC-INPUT 2>/dev/null || /usr/sbin/ip6tables -w -I INPUT 1 -j SPECDEC-INPUT'}

# the unit of a converged engine host (IPv6 on), as the role wrote it before hosts without docker were firewalled
ENGINE_UNIT = """# Ansible managed
[Unit]
Description=specdec.serve DOCKER-USER allow-list for the engine ports, INPUT allow-list for the host listeners
Documentation=file:///etc/specdec/firewall/docker-user.v4
# Runs after dockerd set up its chains; PartOf re-runs it on every docker restart, WantedBy on
# every docker start (boot included).
After=docker.service
PartOf=docker.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/sbin/iptables-restore --noflush /etc/specdec/firewall/docker-user.v4
ExecStart=/usr/sbin/ip6tables-restore --noflush /etc/specdec/firewall/docker-user.v6
# The host-input allow-list (firewall_host_ports): its chain reloaded whole, then the jump from INPUT added
# only where it is missing (iptables-restore cannot test for a rule), so a restart never adds a second one.
ExecStart=/usr/sbin/iptables-restore --noflush /etc/specdec/firewall/host-input.v4
ExecStart=/bin/sh -c "/usr/sbin/iptables -w -C INPUT -j SPECDEC-INPUT 2>/dev/null || /usr/sbin/iptables -w -I INPUT 1 -j SPECDEC-INPUT"
ExecStart=/usr/sbin/ip6tables-restore --noflush /etc/specdec/firewall/host-input.v6
ExecStart=/bin/sh -c "/usr/sbin/ip6tables -w -C INPUT -j SPECDEC-INPUT 2>/dev/null || /usr/sbin/ip6tables -w -I INPUT 1 -j SPECDEC-INPUT"

[Install]
WantedBy=docker.service
"""


def render(docker, ipv6=True):
    # as ansible.builtin.template renders it: trim_blocks, the trailing newline kept
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(os.path.join(REPO, 'roles', 'firewall', 'templates')),
                             trim_blocks=True, keep_trailing_newline=True, undefined=jinja2.StrictUndefined)
    env.filters['specdec.serve.quote_for'] = quote_for
    env.filters['bool'] = bool
    return env.get_template('docker-user.service.j2').render(
        ansible_managed='Ansible managed', _firewall_docker=docker, _firewall_settings=dict(SETTINGS, ipv6=ipv6),
        _firewall_rules_input_v4='/etc/specdec/firewall/host-input.v4',
        _firewall_rules_input_v6='/etc/specdec/firewall/host-input.v6', _firewall_input_jump=JUMP)


def test_a_host_with_docker_keeps_its_unit_byte_for_byte():
    assert render(True) == ENGINE_UNIT


@pytest.mark.parametrize('ipv6', [True, False])
def test_a_host_without_docker_loads_the_host_input_chain_only_at_boot(ipv6):
    unit = render(False, ipv6)
    assert 'docker.service' not in unit and 'docker-user.v' not in unit and 'DOCKER-USER allow-list' not in unit
    lines = unit.splitlines()
    assert lines[-1] == 'WantedBy=multi-user.target'
    for line in ('DefaultDependencies=no', 'Before=network-pre.target shutdown.target',
                 'Wants=network-pre.target systemd-modules-load.service local-fs.target',
                 'ExecStart=/usr/sbin/iptables-restore --noflush /etc/specdec/firewall/host-input.v4'):
        assert line in lines, unit
    assert ('ExecStart=/usr/sbin/ip6tables-restore --noflush /etc/specdec/firewall/host-input.v6' in lines) == ipv6
    assert sum(1 for line in lines if line.startswith('ExecStart=')) == (4 if ipv6 else 2)
