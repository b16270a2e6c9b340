# -*- coding: utf-8 -*-
"""Inputs an adversarial battery found accepted (or refused only on the host): each is refused by the
settings check on the controller, naming the variable the user set, the bad value and what is allowed."""

from __future__ import annotations

import pytest

from ansible_collections.specdec.serve.plugins.plugin_utils import role_spec
from ansible_collections.specdec.serve.plugins.plugin_utils.settings import (
    NESTED_AS,
    POLICY,
    SettingsError,
    check_settings,
    check_value,
)
from ansible_collections.specdec.serve.plugins.plugin_utils.spec_config import SPECULATIVE_KEYS
from ansible_collections.specdec.serve.plugins.plugin_utils.spec_schema import FRACTION, NONNEG, NONNEG_INT, POSINT

INSTANCE = {'name': 'a', 'engine': 'vllm', 'image': 'x/y:0.11.0', 'model': 'm/n', 'port': 8000}


def refused(var, value, extra=None):
    """The refusals of one setting (with others set beside it), as the settings action lists them."""
    role = role_spec.role_of(var)
    values = dict(extra or {})
    values[var] = value
    with pytest.raises(SettingsError) as err:
        check_settings(role_spec.load_options(role), values)
    return err.value.errors


def instance(**keys):
    return [dict(INSTANCE, **keys)]


# --------------------------------------------------------------------------- 1. every number bounded

def _numeric_paths(options, prefix):
    """Dotted paths of the int/float options of a spec, suboptions included."""
    for name, option in sorted((options or {}).items()):
        option = option or {}
        path = prefix + name
        if option.get('type') in ('int', 'float') or option.get('elements') in ('int', 'float'):
            yield path
        if option.get('options'):
            yield from _numeric_paths(option['options'], path + '.')


def _bounded(path):
    top, _, rest = path.partition('.')
    rules = POLICY.get('%s.%s' % (NESTED_AS.get(top, top), rest) if rest else top)
    return isinstance(rules, list) and any(getattr(rule, 'bounds', None) for rule in rules)


NUMERIC = [p for role in role_spec.roles() for p in _numeric_paths(role_spec.load_options(role), '')]
# the numeric keys of an instance's speculative mapping, which the spec describes but does not list
NUMERIC += ['inference_server_instances.speculative.' + k for k, check in sorted(SPECULATIVE_KEYS.items())
            if check in (POSINT, FRACTION, NONNEG, NONNEG_INT)]


def test_the_walk_finds_the_keys_inside_instances():
    assert 'inference_server_instances.max_batch_size' in NUMERIC
    assert 'inference_server_run_instances.port' in NUMERIC
    assert 'inference_server_instances.speculative.max_draft_len' in NUMERIC


@pytest.mark.parametrize('path', NUMERIC)
def test_every_numeric_option_and_key_has_a_bound(path):
    assert _bounded(path), '%s has no range in settings.POLICY' % path


@pytest.mark.parametrize('var, value, said', [
    ('inference_server_instances', instance(speculative={'method': 'eagle3', 'max_draft_len': 10 ** 9}),
     'inference_server_instances[0].speculative.max_draft_len: 1000000000 must be from 1 to 64'),
    ('inference_server_instances', instance(max_batch_size=10 ** 9), 'inference_server_instances[0].max_batch_size: 1000000000'),
    ('inference_server_instances', instance(max_num_tokens=0), 'inference_server_instances[0].max_num_tokens: 0'),
    ('inference_server_instances', instance(max_seq_len=10 ** 12), 'inference_server_instances[0].max_seq_len:'),
    ('inference_server_instances', instance(tensor_parallel_size=10 ** 6), 'inference_server_instances[0].tensor_parallel_size:'),
    ('inference_server_instances', instance(expert_parallel_size=-1), 'inference_server_instances[0].expert_parallel_size:'),
    ('inference_server_instances', instance(gpu_memory_fraction=7.5), 'inference_server_instances[0].gpu_memory_fraction: 7.5'),
    ('inference_server_instances', instance(port=70000), 'inference_server_instances[0].port: 70000 must be a port number'),
    ('inference_server_instances', instance(port='http'), "inference_server_instances[0].port: 'http' must be a port number"),
    ('inference_server_instances', instance(health_timeout=10 ** 9), 'inference_server_instances[0].health_timeout:'),
    ('inference_server_instances', instance(restart_sec=0), 'inference_server_instances[0].restart_sec: 0'),
    ('inference_server_instances', instance(speculative={'method': 'ngram', 'max_draft_len': 4, 'ngram_size': 10 ** 6}),
     'inference_server_instances[0].speculative.ngram_size:'),
    ('inference_server_instances', instance(speculative={'method': 'eagle3', 'max_draft_len': 4,
                                                         'draft_len_schedule': {1: 4, 8: 10 ** 9}}),
     'inference_server_instances[0].speculative.draft_len_schedule:'),
    ('inference_server_run_instances', instance(speculative={'method': 'eagle3', 'max_draft_len': 10 ** 9}),
     'inference_server_run_instances[0].speculative.max_draft_len: 1000000000'),
    ('draft_sweep_instances', instance(speculative={'method': 'eagle3', 'max_draft_len': 10 ** 9}),
     'draft_sweep_instances[0].speculative.max_draft_len: 1000000000 must be from 1 to 64'),
    ('draft_sweep_instances', instance(model='/models/../etc'), 'draft_sweep_instances[0].model:'),
    ('monitoring_exporter_instances', instance(port=70000), 'monitoring_exporter_instances[0].port: 70000 must be a port number'),
    ('monitoring_exporter_instances', instance(max_batch_size=10 ** 9), 'monitoring_exporter_instances[0].max_batch_size: 1000000000'),
    ('inference_server_ulimits', {'stack': 2 ** 64}, 'inference_server_ulimits: has values that are not integers from -1 to'),
    ('inference_server_ulimits', {'memlock': -2}, 'inference_server_ulimits: has values'),
])
def test_numbers_inside_settings_are_bounded(var, value, said):
    errors = refused(var, value)
    assert any(e.startswith(said) for e in errors), errors


def test_every_instance_refusal_is_listed_at_once():
    errors = refused('inference_server_instances', [dict(INSTANCE, max_batch_size=0),
                                                    dict(INSTANCE, name='b', port=0, max_seq_len=0)])
    assert [e.split(':')[0] for e in errors] == ['inference_server_instances[0].max_batch_size',
                                                 'inference_server_instances[1].max_seq_len',
                                                 'inference_server_instances[1].port']


def test_instances_within_the_bounds_pass():
    inst = instance(max_batch_size=256, max_seq_len=131072, tensor_parallel_size=8, gpu_memory_fraction=0.9,
                    speculative={'method': 'eagle3', 'max_draft_len': 3, 'draft_len_schedule': {1: 3, 64: 1}})
    assert check_value('inference_server_instances', inst) == inst


def test_a_schedule_band_without_speculation_passes_a_negative_one_does_not():
    """0 turns speculation off from that batch size (both engines take it: the sweep writes it where the baseline
    won a load level); a negative length is refused."""
    off = instance(speculative={'method': 'ngram', 'max_draft_len': 4, 'draft_len_schedule': {1: 4, 4: 2, 8: 0}})
    assert check_value('inference_server_instances', off) == off
    with pytest.raises(SettingsError, match=r'draft_len_schedule: .* not from 0 to 64, at batch sizes 8'):
        check_value('inference_server_instances',
                    instance(speculative={'method': 'ngram', 'max_draft_len': 4, 'draft_len_schedule': {1: 4, 8: -1}}))


# --------------------------------------------------------------------------- 2. no path climbs out with ..

@pytest.mark.parametrize('var, value, said', [
    ('inference_server_instances', instance(model='/models/../etc'), "inference_server_instances[0].model: '/models/../etc'"),
    ('inference_server_instances', instance(model='org/..'), "inference_server_instances[0].model: 'org/..'"),
    ('inference_server_instances', instance(model='../../root/.ssh'), 'inference_server_instances[0].model:'),
    ('inference_server_instances', instance(speculative={'method': 'eagle3', 'max_draft_len': 3,
                                                         'draft_model': '/models/org/../../../etc'}),
     'inference_server_instances[0].speculative.draft_model:'),
    ('inference_server_run_instances', instance(model='/models/..'), 'inference_server_run_instances[0].model:'),
    ('model_cache_instances', instance(model='/models/../../etc'), 'model_cache_instances[0].model:'),
    ('model_cache_instances', instance(speculative={'draft_model': '/x/../y'}), 'model_cache_instances[0].speculative.draft_model:'),
    ('inference_server_image_archive', '../../etc/shadow', "inference_server_image_archive: '../../etc/shadow' must not contain"),
    ('inference_server_image_archive', 'images/../../x.tar', 'inference_server_image_archive:'),
    ('model_cache_wheelhouse', 'lab/../../wheels', 'model_cache_wheelhouse:'),
    ('container_toolkit_runtime_path', '../../tmp/runtime', 'container_toolkit_runtime_path:'),
])
def test_paths_that_climb_out_with_dotdot_are_refused(var, value, said):
    errors = refused(var, value)
    assert any(e.startswith(said) and '..' in e for e in errors), errors


def test_paths_without_dotdot_pass():
    assert check_value('inference_server_instances', instance(model='/models/org/name..v2'))
    assert check_value('model_cache_wheelhouse', 'lab/hfhub/wheels') == 'lab/hfhub/wheels'
    assert check_value('inference_server_image_archive', '/srv/images.tar') == '/srv/images.tar'


# --------------------------------------------------------------------------- 3. secrets are strings

SECRET = 'hf_s3cretValue0123456789'


@pytest.mark.parametrize('var, value, said', [
    ('inference_server_secret_env', {'HF_TOKEN': 12345678}, "inference_server_secret_env: has values that are not strings: 'HF_TOKEN' (a int)"),
    ('inference_server_secret_env', {'HF_TOKEN': {'v': SECRET}}, "inference_server_secret_env: has values that are not strings: 'HF_TOKEN' (a dict)"),
    ('inference_server_secret_env', {'HF_TOKEN': [SECRET]}, "inference_server_secret_env: has values that are not strings: 'HF_TOKEN' (a list)"),
    ('inference_server_secret_env', {'HF_TOKEN': None}, 'inference_server_secret_env: has values that are not strings'),
    ('inference_server_instances', instance(api_key=12345678901234567), 'inference_server_instances[0].api_key: (value hidden) must be a string'),
    ('inference_server_instances', instance(api_key=[SECRET]), 'inference_server_instances[0].api_key: (value hidden) must be a string'),
    ('inference_server_run_instances', instance(api_key={'k': SECRET}), 'inference_server_run_instances[0].api_key: (value hidden)'),
    ('gateway_api_keys', [{'name': 'a', 'key': 12345678901234567890}], 'gateway_api_keys: item 0 (value hidden) is a int'),
    ('gateway_api_keys', [SECRET, {'name': 'b', 'key': [SECRET]}], 'gateway_api_keys: item 1 (value hidden) is a list'),
    ('gateway_api_keys', [{'name': 'a'}], 'gateway_api_keys: item 0 (value hidden) is a NoneType'),
    ('model_cache_hf_token', 12345678, 'model_cache_hf_token: (value hidden) must already be a str'),
    ('inference_server_registry_password', 12345678, 'inference_server_registry_password: (value hidden)'),
])
def test_secrets_that_are_not_strings_are_refused_without_their_value(var, value, said):
    errors = refused(var, value)
    assert any(e.startswith(said) for e in errors), errors
    assert SECRET not in '\n'.join(errors) and '12345678' not in '\n'.join(errors), errors


def test_string_secrets_pass_and_are_not_returned():
    typed = check_settings(role_spec.load_options('inference_server'), {
        'inference_server_secret_env': {'HF_TOKEN': SECRET},
        'inference_server_instances': instance(api_key=SECRET)})
    assert 'inference_server_secret_env' not in typed and SECRET not in repr(typed)


# --------------------------------------------------------------------------- 4. addresses in their plain form

@pytest.mark.parametrize('var, value, said', [
    ('firewall_allowed_cidrs', ['::ffff:10.0.0.1'], 'is IPv4-mapped IPv6'),
    ('firewall_allowed_cidrs', ['::ffff:10.0.0.0/104'], 'is IPv4-mapped IPv6'),
    ('firewall_allowed_cidrs', ['::ffff:0:0/96'], 'is IPv4-mapped IPv6'),
    ('firewall_allowed_cidrs', ['::/8'], 'is IPv4-mapped IPv6'),
    ('firewall_allowed_cidrs', ['fe80::1%eth0'], 'has an IPv6 zone'),
    ('firewall_allowed_cidrs', ['fe80::%eth0/64'], 'has an IPv6 zone'),
    ('inference_server_publish_address', '::ffff:10.0.0.1', 'is an IPv4-mapped IPv6 address; write the IPv4 address (10.0.0.1)'),
    ('inference_server_publish_address', 'fe80::1%eth0', 'has an IPv6 zone'),
    ('gateway_bind_address', '::ffff:127.0.0.1', 'is an IPv4-mapped IPv6 address'),
    ('gateway_stats_address', 'fe80::1%eth0', 'has an IPv6 zone'),
    ('monitoring_prometheus_listen', '::ffff:192.0.2.7', 'is an IPv4-mapped IPv6 address'),
    ('monitoring_exporter_listen', 'fe80::1%lo', 'has an IPv6 zone'),
    ('model_cache_peer_address', '::ffff:10.0.0.1', 'is an IPv4-mapped IPv6 address'),
    ('model_cache_peer_address', 'fe80::1%eth0', 'has an IPv6 zone'),
])
def test_mapped_and_zoned_ipv6_addresses_are_refused(var, value, said):
    errors = refused(var, value)
    assert any(e.startswith(var + ':') and said in e for e in errors), errors


@pytest.mark.parametrize('var, value, extra, said', [
    ('monitoring_web_users', {'bad name': 'pw'}, None, "has user names that are not"),
    ('monitoring_web_users', {'ops': 1234567}, None, 'has passwords (values hidden) that are not strings of 1 to 72 bytes: ops'),
    ('monitoring_web_users', {'ops': 'p' * 73}, None, 'that are not strings of 1 to 72 bytes: ops'),
    ('monitoring_web_users', ['ops'], None, 'monitoring_web_users'),
    ('monitoring_web_tls_cert', '/etc/web.crt', None, 'is set while monitoring_web_tls_key is empty'),
    ('fleet_view_prometheus_user', 'viewer', None, 'is set while fleet_view_prometheus_password is empty: set both'),
    ('fleet_view_prometheus_user', 'a b', {'fleet_view_prometheus_password': 'x'}, 'must be a name'),
    ('fleet_view_prometheus_url', 'monitor-01:9090', None, 'must be an http(s) URL'),
])
def test_the_credentials_of_prometheus_are_checked_and_never_shown(var, value, extra, said):
    errors = refused(var, value, extra)
    assert any(e.startswith(var + ':') and said in e for e in errors), errors
    assert '1234567' not in str(errors) and 'p' * 73 not in str(errors)


def test_plain_addresses_pass():
    assert check_value('firewall_allowed_cidrs', ['10.0.0.0/8', '2001:db8::/48', 'fe80::/10'])
    assert check_value('inference_server_publish_address', '2001:db8::7') == '2001:db8::7'
    assert check_value('model_cache_peer_address', 'seed.example.net') == 'seed.example.net'


# --------------------------------------------------------------------------- 5. what a host-side module refuses later

@pytest.mark.parametrize('var, value, said', [
    ('model_cache_models', [{'repo_id': 'org/name', 'verify': 'md5'}], "verify 'md5' is not one of size, sha256"),
    ('model_cache_models', [{'repo_id': 'org/name', 'verify': None, 'refresh': 'maybe'}], "refresh 'maybe' must be a boolean"),
    ('model_cache_models', [{'repo_id': 'org/name', 'allow_patterns': '*.json'}], 'allow_patterns'),
    ('model_cache_models', [{'repo_id': 'org/name', 'ignore_patterns': [1]}], 'ignore_patterns'),
    ('model_cache_models', [{'repo_id': 'org/name', 'dest': '/etc'}], 'has unknown keys dest'),
    ('inference_server_instances', instance(state='stopped'), "inference_server_instances[0].state: 'stopped' is not one of started, absent"),
    ('inference_server_instances', instance(engine='sglang'), "inference_server_instances[0].engine: 'sglang' is not one of trtllm, vllm"),
    ('inference_server_instances', instance(gpu_request='all'), "inference_server_instances[0].gpu_request: 'all' is not one of"),
    ('inference_server_instances', instance(sampler='fast'), "inference_server_instances[0].sampler: 'fast' is not one of"),
])
def test_values_a_host_module_would_refuse_are_refused_on_the_controller(var, value, said):
    errors = refused(var, value)
    assert any(e.startswith(var) and said in e for e in errors), errors


def test_a_full_model_entry_passes():
    entry = {'repo_id': 'org/name', 'revision': 'main', 'allow_patterns': ['*.json'], 'ignore_patterns': None,
             'verify': 'sha256', 'refresh': 'yes'}
    assert check_value('model_cache_models', [entry]) == [entry]


# --------------------------------------------------------------------------- 6. no host root in an engine container

@pytest.mark.parametrize('var, value, said', [
    ('inference_server_instances', instance(volumes=['/var/run/docker.sock:/var/run/docker.sock']), "mounts '/var/run/docker.sock'"),
    ('inference_server_instances', instance(volumes=['/run/docker.sock:/s']), "mounts '/run/docker.sock'"),
    ('inference_server_instances', instance(volumes=['/:/host']), "mounts '/' is the host's root"),
    ('inference_server_instances', instance(volumes=['/etc:/x:ro']), "mounts '/etc'"),
    ('inference_server_instances', instance(volumes=['/etc/shadow:/x:ro']), "mounts '/etc/shadow'"),
    ('inference_server_instances', instance(volumes=['/root/.ssh:/x']), 'mounts'),
    ('inference_server_instances', instance(volumes=['/proc:/p']), 'mounts'),
    ('inference_server_instances', instance(volumes=['/sys/fs/cgroup:/c']), 'mounts'),
    ('inference_server_instances', instance(volumes=['/boot:/b']), 'mounts'),
    ('inference_server_instances', instance(volumes=['/var/lib/docker:/d']), 'mounts'),
    ('inference_server_instances', instance(volumes=['/var:/v']), "mounts '/var'"),
    ('inference_server_instances', instance(volumes=['/srv/../etc:/e']), "climbs with '..'"),
    ('inference_server_instances', instance(docker_args=['-v', '/:/host']), "mounts '/'"),
    ('inference_server_instances', instance(docker_args=['-v/etc:/e']), "mounts '/etc'"),
    ('inference_server_instances', instance(docker_args=['--volume=/var/run/docker.sock:/s']), 'mounts'),
    ('inference_server_instances', instance(docker_args=['--mount', 'type=bind,source=/,target=/h']), "mounts '/'"),
    ('inference_server_instances', instance(docker_args=['--mount=type=bind,src=/etc,dst=/e']), "mounts '/etc'"),
    ('inference_server_instances', instance(docker_args=['--device', '/dev/sda']), "device '/dev/sda' is not a GPU"),
    ('inference_server_instances', instance(docker_args=['--device=/dev/mem:/dev/mem']), "device '/dev/mem'"),
    ('inference_server_instances', instance(docker_args=['--privileged']), 'a privileged container is root on the host'),
    ('inference_server_instances', instance(docker_args=['--privileged=true']), 'privileged'),
    ('inference_server_instances', instance(docker_args=['--cap-add=SYS_ADMIN']), 'capabilities'),
    ('inference_server_instances', instance(docker_args=['--pid=host']), "--pid 'host'"),
    ('inference_server_instances', instance(docker_args=['--network', 'host']), "--network 'host'"),
    ('inference_server_instances', instance(docker_args=['--userns=host']), "--userns 'host'"),
    ('inference_server_instances', instance(docker_args=['--security-opt', 'seccomp=unconfined']), '--security-opt'),
    ('inference_server_instances', instance(docker_args=['--volumes-from=other']), '--volumes-from'),
    ('inference_server_docker_args', ['--privileged'], 'inference_server_docker_args:'),
    ('inference_server_docker_args', ['-v', '/run/docker.sock:/run/docker.sock'], 'inference_server_docker_args:'),
    ('inference_server_models_dir', '/etc', "inference_server_models_dir: '/etc' mounts '/etc'"),
    ('inference_server_tiktoken_dir', '/', "inference_server_tiktoken_dir: '/' mounts '/'"),
])
def test_engine_containers_get_no_host_root(var, value, said):
    errors = refused(var, value)
    assert any(e.startswith(var) and said in e for e in errors), errors


def test_the_escape_hatch_names_the_exact_path():
    options = role_spec.load_options('inference_server')
    allow = {'inference_server_allow_host_paths': ['/etc/foo', '/dev/infiniband/uverbs0']}
    inst = instance(volumes=['/etc/foo:/foo:ro'], docker_args=['--device=/dev/infiniband/uverbs0'])
    assert check_settings(options, dict(allow, inference_server_instances=inst))['inference_server_instances'] == inst
    # another path under the same directory, or the privileged flag, is still refused
    with pytest.raises(SettingsError):
        check_settings(options, dict(allow, inference_server_instances=instance(volumes=['/etc/bar:/bar'])))
    with pytest.raises(SettingsError):
        check_settings(options, dict(allow, inference_server_instances=instance(docker_args=['--privileged'])))


def test_the_gpus_and_ordinary_mounts_pass():
    inst = instance(volumes=['/srv/cache:/cache', 'named:/data', '/dev/shm:/dev/shm'],
                    docker_args=['--device=/dev/nvidia0', '--device', 'nvidia.com/gpu=all', '--shm-size=16g',
                                 '--privileged=false', '--security-opt', 'no-new-privileges'])
    assert check_value('inference_server_instances', inst) == inst


# --------------------------------------------------------------------------- 7. no IPv6 publish around the firewall

@pytest.mark.parametrize('address', ['::', '', '2001:db8::7', '::1'])
@pytest.mark.parametrize('ipv6', [False, 'false', 'no'])
def test_an_ipv6_publish_is_refused_while_the_firewall_writes_no_ipv6_rules(address, ipv6):
    errors = refused('inference_server_publish_address', address, {'firewall_ipv6': ipv6})
    assert errors == [refusal_text(address)], errors


def refusal_text(address):
    return ('inference_server_publish_address: %r publishes the engine ports on IPv6 while firewall_ipv6 is false, so no '
            'IPv6 rule would filter them; publish on an IPv4 address (0.0.0.0) or set firewall_ipv6: true' % address)


@pytest.mark.parametrize('address, ipv6', [('::', True), ('', None), ('0.0.0.0', False), ('10.0.0.5', 'false')])
def test_an_ipv4_publish_or_the_firewall_with_ipv6_passes(address, ipv6):
    values = {'inference_server_publish_address': address}
    if ipv6 is not None:
        values['firewall_ipv6'] = ipv6
    typed = check_settings(role_spec.load_options('inference_server'), values)
    assert typed['inference_server_publish_address'] == address


def test_the_settings_action_is_given_the_firewall_setting():
    from ansible_collections.specdec.serve.plugins.plugin_utils.settings import context_needs
    assert context_needs(role_spec.load_options('inference_server')) == ['firewall_ipv6']


# --------------------------------------------------------------------------- 8. docker_host

@pytest.mark.parametrize('var, value', [
    ('docker_host_daemon_options', {'hosts': ['unix:///var/run/docker.sock', 'tcp://0.0.0.0:2375']}),
    ('docker_host_daemon_options', {'hosts': 'tcp://10.0.0.1:2376', 'tls': True}),
    ('docker_host_daemon_options', {'hosts': ['TCP://0.0.0.0:2375'], 'tlsverify': False}),
    ('docker_host_daemon_json_fragments', {'60-api': {'hosts': ['tcp://0.0.0.0:2375']}}),
])
def test_the_docker_api_on_tcp_without_tls_is_refused(var, value):
    errors = refused(var, value)
    assert any(e.startswith(var + ':') and 'without TLS client verification' in e for e in errors), errors


def test_the_docker_api_on_tcp_with_tls_verification_passes():
    options = {'hosts': ['unix:///var/run/docker.sock', 'tcp://10.0.0.1:2376'], 'tlsverify': True,
               'tlscacert': '/etc/docker/ca.pem', 'tlscert': '/etc/docker/cert.pem', 'tlskey': '/etc/docker/key.pem'}
    assert check_value('docker_host_daemon_options', options) == options


def test_host_networking_is_refused_naming_the_firewall_it_bypasses():
    from ansible_collections.specdec.serve.plugins.plugin_utils.settings import docker_args_check
    for words in (["--network=host"], ["--net", "host"]):
        msg = docker_args_check(words, [])
        assert "lifts the container's separation from the host" in msg and "DOCKER-USER" in msg, msg
    assert "DOCKER-USER" not in docker_args_check(["--pid=host"], [])
