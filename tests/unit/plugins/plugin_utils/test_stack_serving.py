"""stack_serving: one instance across a stack, each node's engine command, for TensorRT-LLM over MPI and vLLM
over Ray, from the instance's spec_config rendering; and the world size the stack's GPUs must match."""

import shlex

import pytest

from ansible_collections.specdec.serve.plugins.plugin_utils import _stack_serving as stack_serving
from ansible_collections.specdec.serve.plugins.plugin_utils._spec_config import SpecConfigError, render

NODES = [{'host': 'spark-03', 'address': '192.168.100.10'}, {'host': 'spark-04', 'address': '192.168.100.11'}]
TRTLLM = {'name': 'qwen3-235b', 'engine': 'trtllm', 'image': 'nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc6',
          'model': 'nvidia/Qwen3-235B-A22B-FP4', 'port': 8355, 'tensor_parallel_size': 2, 'max_batch_size': 4,
          'env': {'TRTLLM_ENABLE_PDL': '1'},
          'speculative': {'method': 'eagle3', 'draft_model': 'nvidia/Qwen3-235B-A22B-Eagle3', 'max_draft_len': 3}}
VLLM = {'name': 'qwen3-235b', 'engine': 'vllm', 'image': 'vllm/vllm-openai:v0.11.0', 'model': 'Qwen/Qwen3-235B-A22B',
        'port': 8000, 'tensor_parallel_size': 2, 'speculative': {'method': 'ngram', 'max_draft_len': 4}}


def stack(instance, nodes=NODES, **kw):
    return stack_serving.render_stack(render(instance), instance, nodes, 'enp1s0f0np0', **kw)


def test_trtllm_head_runs_mpirun_over_the_hostfile_and_every_rank_trtllm_llmapi_launch():
    out = stack(TRTLLM)
    spec = render(TRTLLM)
    head, worker = out['nodes']
    assert out['world_size'] == 2 and out['hostfile'] == '192.168.100.10 slots=1\n192.168.100.11 slots=1\n'
    assert (head['role'], head['rank'], worker['role'], worker['rank']) == ('head', 0, 'worker', 1)
    cmd = head['command']
    assert cmd[:6] == ['mpirun', '--allow-run-as-root', '-np', '2', '--hostfile', '/etc/specdec/hostfile']
    launch = cmd.index('trtllm-llmapi-launch')
    assert cmd[launch + 1:] == spec['command'] and spec['command'][0] == 'trtllm-serve'
    assert cmd[cmd.index('--tp_size', launch) + 1] == '2'
    rsh = cmd[cmd.index('plm_rsh_args') + 1]
    assert '-p 2233' in rsh and 'StrictHostKeyChecking=yes' in rsh and 'UserKnownHostsFile=/etc/specdec/trust/known_hosts' in rsh
    exported = [cmd[i + 1] for i, w in enumerate(cmd[:launch]) if w == '-x']
    pinned = ['OMPI_MCA_btl_tcp_port_min_v4', 'OMPI_MCA_btl_tcp_port_min_v6', 'OMPI_MCA_btl_tcp_port_range_v4',
              'OMPI_MCA_btl_tcp_port_range_v6', 'OMPI_MCA_oob_tcp_dynamic_ipv4_ports', 'OMPI_MCA_oob_tcp_dynamic_ipv6_ports']
    assert exported == sorted(['GLOO_SOCKET_IFNAME', 'NCCL_SOCKET_IFNAME', 'OMPI_MCA_btl_tcp_if_include',
                               'OMPI_MCA_oob_tcp_if_include', 'TRTLLM_ENABLE_PDL', 'UCX_NET_DEVICES'] + pinned)
    assert head['env']['NCCL_SOCKET_IFNAME'] == head['env']['UCX_NET_DEVICES'] == 'enp1s0f0np0'
    # OpenMPI's listeners pinned (it opens them on every address whatever *_if_include says): the firewall's ports
    oob, btl = stack_serving.mpi_ports(1)
    for node in (head, worker):
        assert node['env']['OMPI_MCA_oob_tcp_dynamic_ipv4_ports'] == '%d-%d' % (oob[0], oob[-1]) == '6600-6603'
        assert (node['env']['OMPI_MCA_btl_tcp_port_min_v4'], node['env']['OMPI_MCA_btl_tcp_port_range_v4']) == ('6610', '5')
    # above Ray's ports, whatever the GPUs a node
    assert oob[0] > max(stack_serving.ray_ports(64)[1])


def test_a_trtllm_worker_runs_sshd_on_its_link_address_with_the_stacks_keys_only():
    worker = stack(TRTLLM)['nodes'][1]
    cmd = worker['command']
    assert cmd[:6] == ['/usr/sbin/sshd', '-D', '-e', '-p', '2233', '-o']
    opts = [cmd[i + 1] for i, w in enumerate(cmd) if w == '-o']
    assert 'ListenAddress=192.168.100.11' in opts and 'PasswordAuthentication=no' in opts
    assert 'AuthorizedKeysFile=/etc/specdec/trust/authorized_keys' in opts
    assert 'HostKey=/etc/specdec/trust/ssh_host_ed25519_key' in opts
    assert not any('PermitRootLogin=yes' in o or 'StrictHostKeyChecking=no' in o for o in opts)


def test_vllm_workers_join_the_head_ray_and_the_head_serves_on_ray():
    out = stack(VLLM)
    head, worker = out['nodes']
    assert out['ray_port'] == 6379 and out['hostfile'] == '' and out['ssh_port'] is None
    # Ray's other ports pinned next to the GCS port (the firewall lets only the peers reach them)
    pinned = ['--node-manager-port=6380', '--object-manager-port=6381', '--runtime-env-agent-port=6382',
              '--metrics-export-port=6383', '--dashboard-agent-grpc-port=6384', '--dashboard-agent-listen-port=6385']
    workers = '--worker-port-list=' + ','.join(str(p) for p in range(6390, 6400))  # 8 + 2 per GPU
    assert worker['command'] == ['ray', 'start', '--node-ip-address=192.168.100.11', '--disable-usage-stats'] + pinned + [
        workers, '--address=192.168.100.10:6379', '--block']
    assert head['command'][:2] == ['sh', '-c']
    ray, serve = head['command'][2].split(' && exec ')
    assert shlex.split(ray) == ['ray', 'start', '--node-ip-address=192.168.100.10', '--disable-usage-stats'] + pinned + [
        workers, '--head', '--port=6379']
    words = shlex.split(serve)
    assert words[:2] == ['vllm', 'serve'] and words[-2:] == ['--distributed-executor-backend', 'ray']
    assert words[:-2] == render(VLLM)['command'], 'the speculative config JSON survives the shell'
    assert head['env']['VLLM_HOST_IP'] == '192.168.100.10' and worker['env']['VLLM_HOST_IP'] == '192.168.100.11'


def test_a_ray_node_takes_two_worker_ports_per_gpu_and_eight_more():
    ports, workers = stack_serving.ray_ports(gpus_per_node=8)
    assert workers == list(range(6390, 6414)) and max(ports.values()) < workers[0]
    # the Ray client server is not pinned: `ray start` refuses its port without ray[client]
    assert 'ray-client-server-port' not in ports


def test_pipeline_parallel_counts_in_the_world_size():
    inst = dict(TRTLLM, tensor_parallel_size=4, pipeline_parallel_size=2)
    nodes = NODES + [{'host': 'spark-05', 'address': '192.168.100.12'}, {'host': 'spark-06', 'address': '192.168.100.13'}]
    out = stack(inst, nodes=nodes, gpus_per_node=2)
    assert out['world_size'] == 8 and out['hostfile'].count('slots=2') == 4
    head = out['nodes'][0]['command']
    assert head[head.index('--pp_size') + 1] == '2' and head[head.index('-np') + 1] == '8'


@pytest.mark.parametrize('over, words', [
    ({'tensor_parallel_size': 1}, 'tensor_parallel_size 1 x pipeline_parallel_size 1 is 1 GPU, but its stack has 2 nodes '
                                  'x 1 GPU = 2; set them so their product is 2'),
    ({'tensor_parallel_size': 4}, 'is 4 GPUs, but its stack has 2 nodes'),
])
def test_a_world_size_that_is_not_the_stacks_gpus_is_refused(over, words):
    with pytest.raises(SpecConfigError) as err:
        stack(dict(TRTLLM, **over))
    assert str(err.value).startswith("instance 'qwen3-235b': ") and words in str(err.value)


def test_a_stack_of_one_and_a_vllm_backend_of_the_users_are_refused():
    with pytest.raises(SpecConfigError, match='at least two nodes'):
        stack(TRTLLM, nodes=NODES[:1])
    with pytest.raises(SpecConfigError, match='must not set --distributed-executor-backend'):
        stack(dict(VLLM, extra_args=['--distributed-executor-backend=mp']))


def test_pipeline_parallel_size_is_rendered_and_owned():
    args = render(dict(VLLM, pipeline_parallel_size=2))['args']
    assert args[args.index('--pipeline-parallel-size') + 1] == '2'
    with pytest.raises(SpecConfigError, match='must not set --pp_size'):
        render(dict(TRTLLM, extra_args=['--pp_size', '2']))
    with pytest.raises(SpecConfigError, match='set only one of them'):
        render(dict(TRTLLM, pipeline_parallel_size=2, llm_api_options={'pipeline_parallel_size': 1}))


# --------------------------------------------------------------------------- the stack's SSH trust

HEAD_KEY = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHeadHeadHeadHeadHeadHeadHeadHeadHeadHead0001 root@spark-03\n'
HOST_KEY = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHostHostHostHostHostHostHostHostHostHost0002 root@spark-04\n'
LAYOUT_HEAD = {'group': 'spark-stack-a', 'members': ['spark-03', 'spark-04'], 'head': 'spark-03', 'role': 'head',
               'ip': '192.168.100.10', 'peers': [{'host': 'spark-04', 'address': '192.168.100.11'}]}
LAYOUT_WORKER = dict(LAYOUT_HEAD, role='worker', ip='192.168.100.11',
                     peers=[{'host': 'spark-03', 'address': '192.168.100.10'}])
KEYS = {'spark-03': HEAD_KEY, 'spark-04': HOST_KEY}


def test_the_head_pins_each_workers_host_key_at_its_link_address():
    out = stack_serving.trust_files(LAYOUT_HEAD, KEYS)
    assert out == {'known_hosts': '[192.168.100.11]:2233 ' + HOST_KEY.split(' root@')[0] + '\n'}


def test_a_worker_accepts_the_heads_key_only_from_the_heads_link_address_restricted():
    out = stack_serving.trust_files(LAYOUT_WORKER, KEYS, port=2244)
    assert out == {'authorized_keys': 'from="192.168.100.10",restrict ' + HEAD_KEY.split(' root@')[0]
                   + ' specdec-stack-spark-stack-a-head\n'}


@pytest.mark.parametrize('key', [
    'ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ root@x',
    'ssh-ed25519 AAAA\nssh-ed25519 BBBB',
    'command="sh" ssh-ed25519 AAAAC3Nza',
    '-----BEGIN OPENSSH PRIVATE KEY-----',
    42,
])
def test_a_key_that_is_not_one_ed25519_public_key_line_is_refused_naming_the_member(key):
    with pytest.raises(stack_serving.TrustError) as err:
        stack_serving.trust_files(LAYOUT_HEAD, dict(KEYS, **{'spark-04': key}))
    assert "the public key of spark-04 (stack 'spark-stack-a') is not one line of an ed25519" in str(err.value)


def test_an_unknown_key_fails_unless_check_mode_asks_for_nothing():
    with pytest.raises(stack_serving.TrustError, match='run the play on every member of the stack together'):
        stack_serving.trust_files(LAYOUT_WORKER, {'spark-04': HOST_KEY})
    assert stack_serving.trust_files(LAYOUT_WORKER, {'spark-04': HOST_KEY}, missing_ok=True) == {}


def test_the_planner_reads_each_members_key_from_its_facts_and_makes_the_key_its_engine_reads():
    from ansible_collections.specdec.serve.plugins.plugin_utils._checks import PlanRefusal
    from ansible_collections.specdec.serve.plugins.plugin_utils._roles import stack_trust
    hostvars = {'spark-03': {'stack_trust_public_key': HEAD_KEY}, 'spark-04': {'stack_trust_public_key': HOST_KEY}}
    settings = {'dir': '/etc/specdec/stack', 'ssh_port': 2233}
    worker = {'host': 'spark-04', 'hostvars': hostvars, 'vars': {'stack_link_layout': LAYOUT_WORKER}}
    trust = stack_trust.PLANNERS['trust'](settings, None, worker)
    assert trust['authorized_keys'].startswith('from="192.168.100.10",restrict ')
    head = {'host': 'spark-03', 'vars': {'stack_link_layout': LAYOUT_HEAD}}
    assert stack_trust.PLANNERS['main'](settings, None, head)['key'] == '/etc/specdec/stack/id_ed25519'
    assert stack_serving.CLIENT_KEY.endswith('/id_ed25519')
    assert stack_trust.PLANNERS['main'](settings, None, worker) == {
        'key': '/etc/specdec/stack/ssh_host_ed25519_key', 'comment': 'specdec-stack-%s-spark-04' % LAYOUT_WORKER['group']}
    # a member whose key is missing: refused naming the fact, unless in check mode (the key is not made yet)
    with pytest.raises(PlanRefusal, match='stack_trust_public_key: .*run the play on every member'):
        stack_trust.PLANNERS['trust'](settings, None, dict(worker, hostvars={'spark-04': hostvars['spark-04']}))
    assert stack_trust.PLANNERS['trust'](settings, None, dict(worker, hostvars={}, check_mode=True)) == {}
    with pytest.raises(PlanRefusal, match='stack_link_layout: '):
        stack_trust.PLANNERS['main'](settings, None, {'host': 'spark-04', 'vars': {}})
    assert stack_serving.HOST_KEY.endswith('/ssh_host_ed25519_key')
