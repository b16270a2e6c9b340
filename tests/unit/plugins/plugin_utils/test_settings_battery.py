# -*- coding: utf-8 -*-
"""Inputs an adversarial battery found accepted (or refused only on the host): each is refused by the
settings check on the controller, naming the variable the user set, the bad value and what is allowed."""

from __future__ import annotations

import pytest

from ansible_collections.specdec.serve.plugins.plugin_utils import _redaction as redaction, _role_spec as role_spec
from ansible_collections.specdec.serve.plugins.plugin_utils import _settings as S
from ansible_collections.specdec.serve.plugins.plugin_utils._checks import HOST_ROOT_PATHS, PROGRAM_TREES, SHARED_DIRS
from ansible_collections.specdec.serve.plugins.plugin_utils._settings import NESTED_AS, POLICY, SettingsError, check_settings, check_value
from ansible_collections.specdec.serve.plugins.plugin_utils._redaction import secret_shaped
from ansible_collections.specdec.serve.plugins.plugin_utils._spec_instance import SPECULATIVE_KEYS
from ansible_collections.specdec.serve.plugins.plugin_utils._spec_schema import FRACTION, NONNEG, NONNEG_INT, POSINT

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
    ('container_toolkit_runtime_path', '../../tmp/runtime', 'container_toolkit_runtime_path:'),
])
def test_paths_that_climb_out_with_dotdot_are_refused(var, value, said):
    errors = refused(var, value)
    assert any(e.startswith(said) and '..' in e for e in errors), errors


@pytest.mark.parametrize('var, value, used', [
    ('inference_server_image_archive', 'images/../../x.tar', '../x.tar'),
    ('inference_server_image_archive', '/srv/inv/../../lab/a.tar', '/lab/a.tar'),
    ('model_cache_wheelhouse', 'lab/../lab/wheels', 'lab/wheels'),
])
def test_controller_paths_are_taken_as_a_user_writes_them_and_used_normalised(var, value, used):
    # a path on the controller (an archive, a wheelhouse) may climb with '..': it is the user's own machine; the
    # host paths above keep refusing it
    typed = check_value(var, value)
    assert S.for_architecture({var: typed}, 'x86_64')[var] == used


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
    from ansible_collections.specdec.serve.plugins.plugin_utils._settings import context_needs
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
    from ansible_collections.specdec.serve.plugins.plugin_utils._roles.inference_server import docker_args_check
    for words in (["--network=host"], ["--net", "host"]):
        msg = docker_args_check(words, [])
        assert "lifts the container's separation from the host" in msg and "DOCKER-USER" in msg, msg
    assert "DOCKER-USER" not in docker_args_check(["--pid=host"], [])


# --------------------------------------------------------------------------- 9. secrets only in secret fields

@pytest.mark.parametrize('args, flag, home', [
    (['--api-key', SECRET], '--api-key', "the instance's api_key"),
    (['--api-key=' + SECRET], '--api-key', "the instance's api_key"),
    (['--api_key', SECRET], '--api_key', "the instance's api_key"),
    (['--enforce-eager', '--hf-token', SECRET], '--hf-token', 'model_cache_hf_token'),
    (['--hf_token=' + SECRET], '--hf_token', 'inference_server_secret_env as HF_TOKEN'),
    (['--token', SECRET], '--token', 'inference_server_secret_env'),
    (['--password=' + SECRET], '--password', 'inference_server_secret_env'),
    (['--secret', SECRET], '--secret', 'inference_server_secret_env'),
    (['--auth-token', SECRET], '--auth-token', 'inference_server_secret_env'),
    (['--db_password', SECRET], '--db_password', 'inference_server_secret_env'),
    (['--openai-api-key=' + SECRET], '--openai-api-key', 'inference_server_secret_env'),
    (['--client-secret-value', SECRET], '--client-secret-value', 'inference_server_secret_env'),
])
def test_a_secret_flag_in_extra_args_is_refused_naming_the_secret_field_never_the_value(args, flag, home):
    """The engine's command line is in the world-readable unit file: --api-key sk-... there (either form) is refused,
    pointing at the no_log field, and the refusal shows neither the key nor the list that holds it."""
    for var in ('inference_server_instances', 'inference_server_run_instances', 'draft_sweep_instances'):
        errors = refused(var, instance(extra_args=args))
        said = '%s[0].extra_args: (value hidden) has %s, a secret on the engine command line' % (var, flag)
        assert any(e.startswith(said) and home in e for e in errors), errors
        assert SECRET not in '\n'.join(errors), errors


@pytest.mark.parametrize('name, home', [
    ('HF_TOKEN', 'model_cache_hf_token'),
    ('HUGGING_FACE_HUB_TOKEN', 'inference_server_secret_env as HF_TOKEN'),
    ('NGC_API_KEY', 'inference_server_secret_env'),
    ('VLLM_API_KEY', "the instance's api_key"),
    ('OPENAI_APIKEY', 'inference_server_secret_env'),
    ('DB_PASSWORD', 'inference_server_secret_env'),
    ('AWS_SECRET_ACCESS_KEY', 'inference_server_secret_env'),
    ('GITHUB_TOKEN', 'inference_server_secret_env'),
])
def test_a_secret_name_in_the_public_environment_is_refused_without_its_value(name, home):
    errors = refused('inference_server_instances', instance(env={name: SECRET, 'A': 'b'}))
    said = 'inference_server_instances[0].env: (value hidden) has %s, named as a secret' % name
    assert any(e.startswith(said) and ': give %s in ' % name in e and home in e for e in errors), errors
    errors = refused('inference_server_env', {name: SECRET})
    assert any(e.startswith('inference_server_env: has %s, named as a secret' % name) for e in errors), errors
    assert SECRET not in '\n'.join(errors), errors


def test_every_secret_name_of_an_environment_is_named_at_once():
    errors = refused('inference_server_env', {'NGC_API_KEY': SECRET, 'HF_TOKEN': SECRET, 'A': 'b'})
    assert errors[0].startswith('inference_server_env: has HF_TOKEN, NGC_API_KEY, named as secrets'), errors
    assert SECRET not in errors[0]


@pytest.mark.parametrize('args', [
    ['-e', 'HF_TOKEN=' + SECRET],
    ['-eHF_TOKEN=' + SECRET],
    ['--env=NGC_API_KEY=' + SECRET],
    ['--env', 'DB_PASSWORD=' + SECRET],
])
def test_a_secret_given_to_docker_with_its_value_is_refused_without_it(args):
    for var, value, where in (('inference_server_instances', instance(docker_args=args), 'inference_server_instances[0].docker_args:'),
                              ('inference_server_docker_args', args, 'inference_server_docker_args:')):
        errors = refused(var, value)
        assert any(e.startswith(where) and 'a secret on the docker command line' in e and 'inference_server_secret_env' in e
                   for e in errors), errors
        assert SECRET not in '\n'.join(errors), errors


def test_names_that_only_look_like_secrets_pass():
    """Words of the name, not letters in it: a tokenizer, counts of tokens, a secret's file, tiktoken."""
    args = ['--tokenizer', 'org/tok', '--tokenizer-mode', 'auto', '--max-num-batched-tokens', '8192', '--max_num_tokens', '8',
            '--long-prefill-token-threshold', '64', '--max-prompt-adapter-token', '0', '--skip-tokenizer-init',
            '--api-key-file', '/run/key', '--ssl-keyfile', '/k.pem', '--enforce-eager']
    env = {'TIKTOKEN_ENCODINGS_BASE': '/tiktoken', 'TOKENIZERS_PARALLELISM': 'false', 'HF_HUB_OFFLINE': '1',
           'SPECDEC_EMU_PREFILL_MS_PER_TOKEN': '0.01', 'SPECDEC_EMU_DEFAULT_MAX_TOKENS': '64', 'HF_TOKEN_PATH': '/run/t'}
    inst = instance(extra_args=args, env=env, docker_args=['-e', 'HF_TOKEN', '--env=TOKENIZERS_PARALLELISM=false'])
    assert check_value('inference_server_instances', inst) == inst
    assert check_value('inference_server_env', env) == env


@pytest.mark.parametrize('inst, said', [
    # another key's refusal, the secrets beside it
    (instance(port=0, extra_args=['--api-key', SECRET], env={'HF_TOKEN': SECRET}, api_key=SECRET), '[0].port: 0'),
    # the docker_args list is shown, its secret-named assignment hidden
    (instance(docker_args=['--privileged', '-e', 'HF_TOKEN=' + SECRET]),
     "[0].docker_args: ['--privileged', '-e', 'HF_TOKEN=********'] '--privileged'"),
    # a control character: the whole value is shown, each secret in it hidden
    (instance(log_level='info\n', extra_args=['--hf-token', SECRET], api_key=SECRET), ': [{'),
    (instance(extra_args=['--x\n', '--api-key=' + SECRET]), ': [{'),
])
def test_no_refusal_shows_the_value_of_a_secret_shaped_option(inst, said):
    """check_value (the filters' path, which the settings action's scrubbing does not cover) too."""
    with pytest.raises(SettingsError) as err:
        check_value('inference_server_instances', inst)
    text = str(err.value)
    assert 'inference_server_instances' + said in text, text
    assert SECRET not in text, text


def test_the_fields_the_refusals_name_are_the_specs_secret_fields():
    """The homes a refusal points at are no_log in the argument specs (the one owner of that mark)."""
    assert {'inference_server_secret_env', 'model_cache_hf_token'} <= set(redaction.secret_options())
    assert 'api_key' in redaction.secret_keys()
    assert role_spec.load_options('inference_server')['inference_server_instances']['options']['api_key']['no_log']


@pytest.mark.parametrize('name, shaped', [
    ('--api-key', True), ('--api_key', True), ('--hf-token', True), ('--hf_token', True), ('--token', True),
    ('--password', True), ('--secret', True), ('HF_TOKEN', True), ('HUGGING_FACE_HUB_TOKEN', True), ('NGC_API_KEY', True),
    ('api_key', True), ('MY_APIKEY', True), ('X_PASSWD', True),
    ('--tokenizer', False), ('--max-num-batched-tokens', False), ('--long-prefill-token-threshold', False),
    ('--max-prompt-adapter-token', False), ('SPECDEC_EMU_PREFILL_MS_PER_TOKEN', False), ('TIKTOKEN_ENCODINGS_BASE', False),
    ('HF_TOKEN_PATH', False), ('--api-key-file', False), ('--password-dir', False), ('', False), (None, False), (7, False),
])
def test_what_a_secret_shaped_name_is(name, shaped):
    assert secret_shaped(name) is shaped


# --------------------------------------------------------------------------- 10. the tune loop: not root, not the host's directories

SYSTEM_DIRS = ['/', '/etc', '/root', '/usr', '/bin', '/sbin', '/lib', '/lib64', '/boot', '/dev', '/proc', '/sys', '/run',
               '/var', '/var/lib', '/home', '/opt', '/srv', '/tmp']
INSIDE_SYSTEM_TREES = ['/root/.ssh', '/usr/local/tune', '/usr/lib/specdec', '/bin/x', '/sbin/x', '/lib/x', '/lib64/x',
                       '/boot/grub', '/dev/shm/x', '/proc/1', '/sys/fs/x', '/var/lib/docker/volumes/x']


def test_the_system_places_are_one_list():
    """The directories the brief names are the shared lists' (HOST_ROOT_PATHS is the engines' mount check's too)."""
    assert set(SYSTEM_DIRS) <= set(HOST_ROOT_PATHS + PROGRAM_TREES + SHARED_DIRS)


def test_the_tune_loop_never_runs_as_root():
    errors = refused('monitoring_tune_loop_user', 'root')
    assert errors == ["monitoring_tune_loop_user: 'root' is the host's superuser: the role would give root its home and a "
                      'nologin shell, and run the service with every power over the host; name a system user of its own '
                      '(e.g. specdec-tune), which the role creates'], errors
    assert check_value('monitoring_tune_loop_user', 'specdec-tune') == 'specdec-tune'


@pytest.mark.parametrize('path', SYSTEM_DIRS + ['/etc/specdec/tune-loop', '/etc/ssh'] + INSIDE_SYSTEM_TREES)
def test_the_tune_loop_dir_is_never_a_system_directory(path):
    errors = refused('monitoring_tune_loop_dir', path)
    assert len(errors) == 1 and errors[0].startswith('monitoring_tune_loop_dir: %r is ' % path), errors
    assert 'whose owner and mode the role would take over; use a directory of its own, such as /var/lib/specdec/tune-loop' \
        in errors[0], errors


@pytest.mark.parametrize('path', ['/var/lib/specdec/tune-loop', '/var/lib/specdec-tune', '/opt/specdec/tune-loop',
                                  '/srv/tune-loop', '/home/specdec-tune', '/var/tmp/tune-loop'])
def test_a_directory_of_its_own_passes_for_the_tune_loop(path):
    assert check_value('monitoring_tune_loop_dir', path) == path


# --------------------------------------------------------------------------- 11. a stack: its own directory, a link interface

@pytest.mark.parametrize('path', SYSTEM_DIRS + INSIDE_SYSTEM_TREES)
def test_the_stack_trust_dir_is_never_a_system_directory(path):
    errors = refused('stack_trust_dir', path)
    assert len(errors) == 1 and errors[0].startswith('stack_trust_dir: %r is ' % path), errors
    assert 'use a directory of its own, such as /etc/specdec/stack' in errors[0], errors


@pytest.mark.parametrize('path', ['/etc/specdec/stack', '/etc/specdec/trust', '/var/lib/specdec/stack', '/srv/stack'])
def test_a_directory_of_its_own_passes_for_the_stack_trust(path):
    assert check_value('stack_trust_dir', path) == path


@pytest.mark.parametrize('name', ['lo', 'docker0', 'docker_gwbridge', 'br-0123abcd4567', 'veth1a2b3c4', 'virbr0'])
def test_the_stack_link_is_never_loopback_or_a_bridge(name):
    errors = refused('stack_link_interface', name)
    assert errors == ["stack_link_interface: %r is loopback or a bridge or virtual interface (lo, docker0, docker_gwbridge, "
                      "br-*, veth*, virbr*), which links no hosts; name the port of the link itself (e.g. enp1s0f0np0)"
                      % name], errors


@pytest.mark.parametrize('name', ['enp1s0f0np0', 'eth1', 'ib0', 'bond0', 'enP2p1s0f1np1'])
def test_a_link_port_passes(name):
    assert check_value('stack_link_interface', name) == name


# --------------------------------------------------------------------------- 12. the gateway's exporter listens as the others do

@pytest.mark.parametrize('address', ['0.0.0.0', '::'])
def test_the_gateway_exporter_never_listens_on_every_address(address):
    errors = refused('gateway_stats_address', address)
    other = refused('monitoring_prometheus_listen', address)
    # the one listener rule: the same words as the monitoring listeners'
    assert [e.replace('gateway_stats_address', '') for e in errors] == [e.replace('monitoring_prometheus_listen', '') for e in other]
    assert 'listens on every interface' in errors[0]


def test_the_gateway_exporter_on_one_address_passes():
    assert refused('gateway_stats_address', '') == ["gateway_stats_address: '' must not be empty"]
    for address in ('127.0.0.1', '10.0.0.5', 'fd00::5'):
        assert check_value('gateway_stats_address', address) == address
