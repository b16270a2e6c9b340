# -*- coding: utf-8 -*-
"""inference_server's plan of an instance served across a stack (``stack:``): each node's part (the head's
mpirun, a worker's sshd, vLLM's Ray), its docker options on the host's network, what it waits for, where its
health is asked; the refusals; the stack's preflight over the members' views; and the firewall's host-input
entries of a stack's ports."""

from __future__ import annotations

import copy
import subprocess

import pytest

from ansible_collections.specdec.serve.plugins.plugin_utils import _firewall as firewall, _stack_serving as stack_serving
from ansible_collections.specdec.serve.plugins.plugin_utils._inference_server import expected_files
from ansible_collections.specdec.serve.plugins.plugin_utils._serving_plan import (
    PlanError,
    build_plan,
    published_ports,
    wait_script,
)

SETTINGS = {'config_dir': '/etc/specdec', 'gpus': 'all', 'gpu_request': 'gpus', 'docker_args': [],
            'health_timeout': 1800, 'restart_sec': 10, 'docker_bin': '/usr/bin/docker',
            'ulimits': {'memlock': -1, 'stack': 67108864}, 'models_dir': '/var/lib/specdec/models',
            'tiktoken_dir': '/var/lib/specdec/tiktoken', 'publish_address': '', 'env': {},
            'stack_devices': ['/dev/infiniband']}
TRT = {'name': 'big', 'engine': 'trtllm', 'image': 'nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc6',
       'model': 'openai/gpt-oss-120b', 'port': 8355, 'stack': 'spark-stack-a', 'tensor_parallel_size': 2,
       'speculative': {'method': 'eagle3', 'draft_model': 'nvidia/gpt-oss-120b-Eagle3', 'max_draft_len': 3}}
VLLM = {'name': 'big', 'engine': 'vllm', 'image': 'vllm/vllm-openai:v0.11.0', 'model': 'openai/gpt-oss-120b',
        'port': 8000, 'stack': 'spark-stack-a', 'tensor_parallel_size': 2}
ADDRESSES = {'spark-03': '192.168.100.10', 'spark-04': '192.168.100.11'}


def layout(host):
    """stack_link's layout of a member of spark-stack-a (head spark-03)."""
    members = ['spark-03', 'spark-04']
    return {'group': 'spark-stack-a', 'members': members, 'head': 'spark-03', 'rank': members.index(host),
            'role': 'head' if host == 'spark-03' else 'worker', 'interface': 'enp1s0f0np0', 'ip': ADDRESSES[host],
            'peers': [{'host': h, 'address': ADDRESSES[h]} for h in members if h != host]}


def plan(host, instance=TRT, settings=None, **context):
    ctx = {'layout': layout(host), 'trust_dir': '/etc/specdec/stack', 'ssh_port': 2233}
    ctx.update(context)
    return build_plan([copy.deepcopy(instance)], dict(SETTINGS, **(settings or {})), ctx)[0]


def refused(instance, *texts, **context):
    with pytest.raises(PlanError) as err:
        plan('spark-04', instance, **context)
    for text in texts:
        assert text in str(err.value)


def test_the_head_runs_mpirun_on_the_host_network_with_its_hostfile_and_the_stacks_trust():
    entry = plan('spark-03')
    argv = entry['docker_argv']
    assert '--network=host' in argv and '--publish' not in argv
    assert '/etc/specdec/stack:/etc/specdec/trust:ro' in argv
    assert '/etc/specdec/big/hostfile:/etc/specdec/hostfile:ro' in argv
    assert '--device=/dev/infiniband' in argv
    assert entry['container_command'][:4] == ['mpirun', '--allow-run-as-root', '-np', '2']
    assert entry['stack']['hostfile'] == '192.168.100.10 slots=1\n192.168.100.11 slots=1\n'
    # every rank gets the engine's environment, the tiktoken encodings' too (the second node's failure)
    command = entry['container_command']
    exported = [command[i + 1] for i, word in enumerate(command) if word == '-x']
    assert 'TIKTOKEN_ENCODINGS_BASE' in exported and 'NCCL_SOCKET_IFNAME' in exported
    assert entry['env']['NCCL_SOCKET_IFNAME'] == 'enp1s0f0np0' and entry['env']['HF_HUB_OFFLINE'] == '1'
    # it waits for its worker's sshd on the link; its health is its own port
    assert entry['stack']['waits'] == [['192.168.100.11', 2233]]
    # so it restarts after its workers, never beside them (it could reach a worker's sshd on its way out)
    assert entry['stack']['restarts_after_peers'] is True
    assert entry['health_url'] == 'http://127.0.0.1:8355'
    assert entry['stack_summary'] == {'group': 'spark-stack-a', 'role': 'head', 'rank': 0, 'world_size': 2,
                                      'head': 'spark-03'}
    # the engine's own check runs the plain command, not mpirun
    assert entry['check_command'][0] == 'trtllm-serve'


def test_a_worker_runs_sshd_waits_for_nothing_and_is_healthy_through_its_head():
    entry = plan('spark-04')
    assert entry['container_command'][0] == '/usr/sbin/sshd'
    assert 'ListenAddress=192.168.100.11' in entry['container_command']
    assert entry['stack']['waits'] == [] and entry['stack']['wait_argv'] == []
    assert entry['stack']['restarts_after_peers'] is False
    assert entry['stack']['hostfile'] == '' and not any('hostfile' in w for w in entry['docker_argv'])
    assert entry['health_url'] == 'http://192.168.100.10:8355'
    assert entry['stack_summary']['role'] == 'worker' and entry['stack_summary']['rank'] == 1


def test_vllm_workers_wait_for_the_heads_ray_and_run_ray_as_their_entrypoint():
    head, worker = plan('spark-03', VLLM), plan('spark-04', VLLM)
    assert head['stack']['waits'] == [] and worker['stack']['waits'] == [['192.168.100.10', 6379]]
    # a Ray cluster restarts the other way round: its head first
    assert head['stack']['restarts_after_peers'] is False and worker['stack']['restarts_after_peers'] is True
    assert worker['docker_argv'][worker['docker_argv'].index('--entrypoint') + 1] == 'ray'
    assert head['docker_argv'][head['docker_argv'].index('--entrypoint') + 1] == 'sh'
    assert head['container_command'][0] == '-c' and '--distributed-executor-backend ray' in head['container_command'][1]


def test_the_wait_script_waits_for_each_address_and_fails_naming_it(tmp_path):
    script = wait_script([['127.0.0.1', 1]], 2)
    proc = subprocess.run(['bash', '-c', script], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 1 and 'stack node 127.0.0.1/1 not answering after 2 s' in proc.stderr


@pytest.mark.parametrize('context, texts', [
    ({'layout': None}, ["stack: 'spark-stack-a', but this host is in no stack"]),
    ({'layout': dict(layout('spark-04'), group='other')}, ["'spark-stack-a' is not the stack of this host, 'other'"]),
])
def test_an_instance_of_a_stack_the_host_is_not_in_is_refused(context, texts):
    refused(TRT, *texts, **context)


@pytest.mark.parametrize('change, texts', [
    ({'tensor_parallel_size': 4}, ['tensor_parallel_size 4 x pipeline_parallel_size 1 is 4 GPUs', '2 nodes x 1 GPU = 2']),
    ({'gpus_per_node': 0}, ['gpus_per_node', 'must be an integer from 1 to 64']),
    ({'stack': 'a b'}, ['.stack', 'must be the inventory group of a stack']),
])
def test_a_stack_instance_that_does_not_fit_the_stack_is_refused(change, texts):
    refused(dict(TRT, **change), *texts)


def test_gpus_per_node_sets_the_slots_and_the_world():
    entry = plan('spark-03', dict(TRT, tensor_parallel_size=8, pipeline_parallel_size=2, gpus_per_node=8))
    assert entry['stack']['world_size'] == 16
    assert entry['stack']['hostfile'] == '192.168.100.10 slots=8\n192.168.100.11 slots=8\n'


def test_a_stack_publishes_no_port_and_writes_its_hostfile():
    assert published_ports([TRT, dict(TRT, name='single', stack=None, port=8000)]) == [8000]
    stat = {'engine.env': '600:root:root', 'unit': '644:root:root', 'engine.yaml': '644:root:root',
            'hostfile': '644:root:root'}
    assert '/etc/specdec/big/hostfile' in expected_files(plan('spark-03'), stat, 'env', 'unit')
    assert '/etc/specdec/big/hostfile' not in expected_files(plan('spark-04'), stat, 'env', 'unit')


def test_the_preflight_probe_reports_a_digest_per_model_directory(tmp_path):
    model = tmp_path / 'model'
    model.mkdir()
    (model / 'config.json').write_text('{}')
    out = subprocess.run(stack_serving.probe_argv([str(model), str(tmp_path / 'absent')]),
                         capture_output=True, text=True, check=True).stdout.splitlines()
    clock, models = stack_serving.probe_view(out)
    assert clock > 1e9 and models[str(tmp_path / 'absent')] == 'absent'
    assert len(models[str(model)]) == 64
    (model / 'config.json').write_text('{"x": 1}')
    again = stack_serving.probe_view(subprocess.run(stack_serving.probe_argv([str(model)]), capture_output=True,
                                                    text=True, check=True).stdout.splitlines())[1]
    assert again[str(model)] != models[str(model)]
    assert plan('spark-03')['stack']['probe_argv'][-2:] == ['/var/lib/specdec/models/openai/gpt-oss-120b',
                                                           '/var/lib/specdec/models/nvidia/gpt-oss-120b-Eagle3']


NODES = [{'host': 'spark-03', 'address': '192.168.100.10'}, {'host': 'spark-04', 'address': '192.168.100.11'}]
GOOD = {'image_id': 'sha256:aa', 'time': 1000.0, 'models': {'/m/a': 'd1'}, 'link': []}


def preflight(views, play=('spark-03', 'spark-04'), skew=10):
    return stack_serving.preflight('big', NODES, views, list(play), skew)


def test_a_stack_whose_members_agree_may_change():
    assert preflight({'spark-03': GOOD, 'spark-04': dict(GOOD, time=1004.0)}) == []


@pytest.mark.parametrize('worker, play, text', [
    (GOOD, ('spark-03',), 'spark-04 of its stack is not in this play'),
    (dict(GOOD, image_id='sha256:bb'), None, 'node spark-04 runs image sha256:bb, the head spark-03 runs sha256:aa'),
    (dict(GOOD, image_id=''), None, 'node spark-04: its image is not on the host'),
    (dict(GOOD, models={'/m/a': 'd2'}), None, 'node spark-04: the model files of /m/a differ from the head'),
    (dict(GOOD, models={}), None, 'the model files of /m/a differ from the head\'s (absent'),
    (dict(GOOD, time=1030.0), None, 'the clocks of the stack\'s nodes differ by 30.0 s'),
    (dict(GOOD, models={'/m/a': 'absent'}), None, "the model files of /m/a differ from the head's (absent"),
    (dict(GOOD, link=['enp1s0f0np0: MTU 1500, want 9000']), None, 'node spark-04: the link is not ready: enp1s0f0np0'),
])
def test_a_stack_that_is_not_ready_is_refused_naming_the_node_and_the_check(worker, play, text):
    problems = preflight({'spark-03': GOOD, 'spark-04': worker}, play or ('spark-03', 'spark-04'))
    assert any(text in p for p in problems), problems


def test_a_model_the_head_lacks_is_refused_even_where_no_member_has_it():
    views = {h: dict(GOOD, models={'/m/a': 'absent'}) for h in ('spark-03', 'spark-04')}
    assert preflight(views) == ["instance 'big': node spark-03: /m/a is not on the host; every node of a stack "
                                'loads the model from its own disk (model_cache)']


def _nccl_probe(tmp_path, host, content):
    """A member's probe, run for real, of a host library directory mounted into its engine (as the volume gives it)."""
    lib = tmp_path / host / 'nccl' / 'lib'
    lib.mkdir(parents=True)
    if content is not None:
        (lib / 'libnccl.so.2.27.7').write_text(content)
        (lib / 'libnccl.so.2').symlink_to('libnccl.so.2.27.7')
    (lib / 'README').write_text('not a library')
    lines = subprocess.run(stack_serving.probe_argv(['/m/a'], [str(lib.parent)]), capture_output=True, text=True,
                           check=True).stdout.splitlines()
    # each member mounts the same host path: the lab's tmp_path stands in for each host's own filesystem
    return dict((path.replace(str(tmp_path / host), ''), digest)
                for path, digest in stack_serving.nccl_view(lines).items())


def test_the_probe_reports_each_nccl_library_the_engine_mounts_from_the_host(tmp_path):
    nccl = _nccl_probe(tmp_path, 'spark-03', 'nccl 2.27.7 build A')
    assert sorted(nccl) == ['/nccl/lib/libnccl.so.2', '/nccl/lib/libnccl.so.2.27.7']
    assert len(set(nccl.values())) == 1 and len(nccl['/nccl/lib/libnccl.so.2']) == 64  # the link read as its target
    # the model directories' lines are not NCCL's, and the volumes give the host paths to read
    entry = plan('spark-03', dict(TRT, volumes=['/opt/nccl/lib:/usr/local/nccl/lib:ro', 'cache:/cache']))
    assert entry['stack']['probe_argv'][-2:] == ['--', '/opt/nccl/lib']
    assert '--' not in plan('spark-03')['stack']['probe_argv']


@pytest.mark.parametrize('worker, said', [
    ('nccl 2.27.7 build B', 'spark-04: sha256 '),   # the same version string, another binary
    (None, 'spark-04: absent'),                      # the head mounts one, the worker has none there
])
def test_a_member_whose_mounted_nccl_differs_from_the_heads_is_named(tmp_path, worker, said):
    head = _nccl_probe(tmp_path, 'spark-03', 'nccl 2.27.7 build A')
    views = {'spark-03': dict(GOOD, nccl=head), 'spark-04': dict(GOOD, nccl=_nccl_probe(tmp_path, 'spark-04', worker))}
    problems = preflight(views)
    assert len(problems) == 2, problems  # the library and its link
    assert all(p.startswith("instance 'big': node spark-04: the NCCL library /nccl/lib/libnccl.so.2") for p in problems)
    assert all(said in p and 'every node of a stack loads the same NCCL build' in p for p in problems), problems
    same = _nccl_probe(tmp_path / 'again', 'spark-04', 'nccl 2.27.7 build A')
    assert preflight({'spark-03': dict(GOOD, nccl=head), 'spark-04': dict(GOOD, nccl=same)}) == []


def test_the_link_view_names_each_peer_that_did_not_answer():
    assert stack_serving.link_view({'problems': ['x: down'], 'peers': [
        {'address': '192.168.100.11', 'ok': False, 'summary': '1 packets transmitted, 0 received'},
        {'address': '192.168.100.12', 'ok': True}]}) == [
        'x: down', 'peer 192.168.100.11 does not answer at the full MTU (1 packets transmitted, 0 received)']


HOSTVARS = {h: {'stack_link_group': 'spark-stack-a', 'stack_link_address': a + '/24',
                'inference_server_instances': [TRT]} for h, a in ADDRESSES.items()}
GROUPS = {'spark-stack-a': ['spark-03', 'spark-04']}


def test_the_firewall_opens_the_heads_port_to_the_clients_and_a_workers_sshd_to_the_head_only():
    oob, btl = stack_serving.mpi_ports(1)
    mpi = {'spark-03': '192.168.100.11', 'spark-04': '192.168.100.10'}  # each member's OpenMPI ports: its peer's
    for name in mpi:
        entries = firewall.stack_ports(HOSTVARS, GROUPS, name, ['10.0.0.5'])
        assert entries[1:] == ([{'name': 'mpi-big-oob-%d' % p, 'port': p, 'sources': [mpi[name]]} for p in oob]
                               + [{'name': 'mpi-big-btl-%d' % p, 'port': p, 'sources': [mpi[name]]} for p in btl])
    assert firewall.stack_ports(HOSTVARS, GROUPS, 'spark-03', ['10.0.0.5'])[0] == {
        'name': 'engine-big', 'port': 8355, 'sources': ['10.0.0.5']}
    assert firewall.stack_ports(HOSTVARS, GROUPS, 'spark-04', ['10.0.0.5'])[0] == {
        'name': 'stack-ssh-big', 'port': 2233, 'sources': ['192.168.100.10']}
    vllm = dict(HOSTVARS, **{'spark-03': dict(HOSTVARS['spark-03'], inference_server_instances=[VLLM])})
    head = firewall.stack_ports(vllm, GROUPS, 'spark-03', [])
    assert head[:3] == [
        {'name': 'engine-big', 'port': 8000, 'sources': []},
        {'name': 'ray-big', 'port': 6379, 'sources': ['192.168.100.11']},
        {'name': 'ray-big-node-manager', 'port': 6380, 'sources': ['192.168.100.11']}]
    # every port the head's `ray start` pins (stack_serving.ray_ports), from the worker only
    ports, workers = stack_serving.ray_ports()
    # and Ray's client server, where ray[client] is installed (Ray's own 10001)
    assert sorted(e['port'] for e in head[1:]) == sorted([6379, 10001] + list(ports.values()) + workers)
    assert all(e['sources'] == ['192.168.100.11'] for e in head[1:])
    # a worker's, from the head
    vllm['spark-04'] = dict(HOSTVARS['spark-04'], inference_server_instances=[dict(VLLM, gpus_per_node=2)])
    worker = firewall.stack_ports(vllm, GROUPS, 'spark-04', [])
    ports, workers = stack_serving.ray_ports(2)
    assert sorted(e['port'] for e in worker) == sorted(list(ports.values()) + workers) and len(workers) == 12
    assert all(e['sources'] == ['192.168.100.10'] for e in worker) and 'ray-big-worker-6401' in [e['name'] for e in worker]
    # the play's own instances (vars files) count over the inventory's
    assert firewall.stack_ports(HOSTVARS, GROUPS, 'spark-03', [], instances=[]) == []


def test_a_stack_port_the_inventory_gets_wrong_is_refused_naming_it():
    bad = dict(HOSTVARS, **{'spark-03': dict(HOSTVARS['spark-03'], inference_server_instances=[dict(TRT, port='x')])})
    with pytest.raises(firewall.FirewallError, match="the port of instance big on spark-03 is 'x'"):
        firewall.stack_ports(bad, GROUPS, 'spark-03', [])
    # the serving plan's own rule (serving_plan.node_gpus): the firewall refuses what the plan would
    for wrong in (65, 'eight', True):
        bad = dict(HOSTVARS, **{'spark-04': dict(HOSTVARS['spark-04'], inference_server_instances=[dict(VLLM, gpus_per_node=wrong)])})
        with pytest.raises(firewall.FirewallError, match="the gpus_per_node of instance big on spark-04 is %r, not a number "
                                                         "of GPUs from 1 to 64" % (wrong,)):
            firewall.stack_ports(bad, GROUPS, 'spark-04', [])


def test_the_gateway_routes_a_stacks_instance_to_its_head_only():
    from ansible_collections.specdec.serve.plugins.plugin_utils._gateway import gateway_plan
    stack_of = {'members': ['spark-04', 'spark-03'], 'head': ''}
    engines = {h: {'inventory': True, 'listed': False, 'address': '10.0.0.%d' % (i + 3),
                   'instances': [TRT], 'stack': stack_of} for i, h in enumerate(['spark-03', 'spark-04'])}
    backends = gateway_plan(engines, {'require_keys': False})['backends']
    assert [s['host'] for b in backends for s in b['servers']] == ['spark-03']
    engines['spark-03']['stack'] = dict(stack_of, head='spark-04')
    engines['spark-04']['stack'] = dict(stack_of, head='spark-04')
    assert [s['host'] for b in gateway_plan(engines, {'require_keys': False})['backends'] for s in b['servers']] == ['spark-04']


def test_a_rollout_batches_a_stack_as_one_member():
    from ansible_collections.specdec.serve.plugins.plugin_utils._fleet import rollout_batches
    hosts = ['spark-01', 'spark-02', 'spark-03', 'spark-04', 'spark-05']
    change = [{'instance': 'x', 'reasons': ['engine.yaml differs']}]
    stack_of = ['spark-03', 'spark-04']
    stacks = [[], [], stack_of, stack_of, []]
    # only the stack's worker changed: the whole stack goes, in one batch (the canary), then one host at a time
    out = rollout_batches(hosts, [change, [], [], change, change], stacks, 1, '1')
    assert out['units'] == [['spark-01'], ['spark-03', 'spark-04'], ['spark-05']]
    assert out['hosts'] == ['spark-01', 'spark-03', 'spark-04', 'spark-05'] and out['serial'] == [1, 2, 1]
    out = rollout_batches(hosts, [[], [], change, [], []], stacks, 1, '25%')
    assert out['hosts'] == ['spark-03', 'spark-04'] and out['serial'] == [2]
    # a percentage counts members, at least one
    out = rollout_batches(hosts, [change] * 5, stacks, 1, '50%')
    assert out['units'] == [['spark-01'], ['spark-02'], ['spark-03', 'spark-04'], ['spark-05']]
    assert out['serial'] == [1, 3, 1]
    assert rollout_batches(hosts, [[]] * 5, [[]] * 5, 1, '25%') == {'hosts': [], 'serial': [1], 'units': []}
    with pytest.raises(ValueError, match='three lists of one length'):
        rollout_batches(hosts, [], stacks, 1, '1')


def test_a_sweep_of_a_stack_is_measured_by_its_head_and_followed_by_its_workers():
    from ansible_collections.specdec.serve.plugins.plugin_utils._sweep_records import SweepRecordError, stack_part
    layout = {'group': 'spark-stack-a', 'members': ['spark-03', 'spark-04']}
    play = ['spark-03', 'spark-04', 'spark-05']
    head = stack_part(TRT, layout, 'spark-03', play)
    worker = stack_part(TRT, layout, 'spark-04', play)
    assert head == {'group': 'spark-stack-a', 'members': ['spark-03', 'spark-04'], 'head': 'spark-03',
                    'role': 'head'}
    assert worker == dict(head, role='worker')
    # an instance of the host's own is its own to measure, stack or not
    alone = dict(TRT, stack=None)
    assert stack_part(alone, layout, 'spark-04', play) == {'group': None, 'members': ['spark-04'], 'head': 'spark-04',
                                                           'role': None}
    with pytest.raises(SweepRecordError, match='spark-04 of its members is not in this play; a stack is swept as one '
                                               r'\(run the sweep on every member, e.g. -l spark-stack-a\)'):
        stack_part(TRT, layout, 'spark-03', ['spark-03'])
    with pytest.raises(SweepRecordError, match='but spark-05 is in no stack'):
        stack_part(TRT, None, 'spark-05', play)
    with pytest.raises(SweepRecordError, match='but spark-03 is a member of spark-stack-b'):
        stack_part(TRT, dict(layout, group='spark-stack-b'), 'spark-03', play)


def test_a_stack_restarts_as_one_when_any_member_wants_to():
    from ansible_collections.specdec.serve.plugins.plugin_utils._roles.inference_server import PLANNERS

    def stack_restart(entry, hostvars, wanted):
        """The role's planner entry, as instance.yml asks it: this host's wish, the members' from the inventory."""
        return PLANNERS['stack_restart']({}, None, {'hostvars': hostvars,
                                                    'reported': {'instance': entry, 'wanted': wanted}})['restart']

    entry = {'name': 'big', 'stack': {'nodes': [{'host': 'spark-03'}, {'host': 'spark-04'}]}}
    fact = '_inference_server_restart_wanted'
    # only the worker's files changed: the head restarts too, and the other way round
    assert stack_restart(entry, {'spark-03': {fact: False}, 'spark-04': {fact: True}}, False) is True
    assert stack_restart(entry, {'spark-03': {fact: True}, 'spark-04': {fact: False}}, False) is True
    assert stack_restart(entry, {'spark-03': {fact: False}, 'spark-04': {fact: False}}, False) is False
    # a member that has not decided (not in this run) counts as not wanting to
    assert stack_restart(entry, {'spark-03': {fact: False}}, False) is False
    # an instance of the host's own follows the host's wish alone (a bool-like string, as a template gives it)
    alone = {'name': 'small', 'stack': None}
    assert stack_restart(alone, {}, 'True') is True and stack_restart(alone, {'spark-03': {fact: True}}, False) is False
