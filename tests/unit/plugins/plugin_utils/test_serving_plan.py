# -*- coding: utf-8 -*-
"""inference_server's deployment plan: every instance checked and rendered on the controller, every
refusal naming the instance, the key and the value; and the change list read from one host probe."""

from __future__ import annotations

import copy

import pytest

from ansible_collections.specdec.serve.plugins.plugin_utils._serving_plan import (
    PlanError,
    build_plan,
    bypass_option,
    contained_dir,
    plan_changes,
    published_ports,
)

SETTINGS = {'config_dir': '/etc/specdec', 'gpus': 'all', 'gpu_request': 'gpus', 'docker_args': [],
            'health_timeout': 1800, 'restart_sec': 10, 'docker_bin': '/usr/bin/docker',
            'ulimits': {'memlock': -1, 'stack': 67108864}, 'models_dir': '/var/lib/specdec/models',
            'tiktoken_dir': '/var/lib/specdec/tiktoken', 'publish_address': ''}
TRT = {'name': 'gpt-oss-120b', 'engine': 'trtllm', 'image': 'nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc6',
       'model': 'openai/gpt-oss-120b', 'port': 8000,
       'speculative': {'method': 'eagle3', 'draft_model': 'nvidia/gpt-oss-120b-Eagle3', 'max_draft_len': 3}}
VLLM = {'name': 'vllm-a', 'engine': 'vllm', 'image': 'vllm/vllm-openai:v0.11.0', 'model': 'openai/gpt-oss-120b',
        'port': 8001, 'api_key': 'k-0123456789'}


def inst(base=TRT, **changes):
    out = copy.deepcopy(base)
    out.update(changes)
    return out


def refused(instances, *texts, settings=None):
    with pytest.raises(PlanError) as err:
        build_plan(instances, dict(SETTINGS, **(settings or {})))
    message = str(err.value)
    for text in texts:
        assert text in message, message
    return err.value


def test_a_good_plan_has_everything_the_role_writes():
    plan = build_plan([TRT, VLLM, {'name': 'old', 'state': 'absent'}], SETTINGS)
    trt, vllm, old = plan
    assert trt['dir'] == '/etc/specdec/gpt-oss-120b' and trt['unit'] == 'specdec-gpt-oss-120b.service'
    assert trt['gpu_args'] == ['--gpus', 'all'] and trt['port'] == 8000
    argv = trt['docker_argv']
    assert argv[:2] == ['/usr/bin/docker', 'run'] and '--publish' in argv and argv[argv.index('--publish') + 1] == '8000:8000'
    assert '/etc/specdec/gpt-oss-120b/engine.yaml:/etc/specdec/engine.yaml:ro' in argv
    assert not any('engine.yaml' in w for w in vllm['docker_argv'])
    assert old['state'] == 'absent' and old['spec'] is None and old['dir'] == '/etc/specdec/old'


def test_no_secret_reaches_the_plan():
    assert 'k-0123456789' not in repr(build_plan([VLLM], SETTINGS))


@pytest.mark.parametrize('gpus, how, args', [
    ('none', 'gpus', []), ('all', 'cdi', ['--device', 'nvidia.com/gpu=all']), ('cdi', 'gpus', ['--device', 'nvidia.com/gpu=all']),
    ([0, 1], 'gpus', ['--gpus', '"device=0,1"']), ([2], 'cdi', ['--device=nvidia.com/gpu=2']), ('0,1', 'gpus', ['--gpus', '"device=0,1"']),
])
def test_gpu_flags(gpus, how, args):
    assert build_plan([inst(gpus=gpus, gpu_request=how)], SETTINGS)[0]['gpu_args'] == args


def test_a_publish_address_binds_the_port():
    plan = build_plan([TRT], dict(SETTINGS, publish_address='10.0.0.5'))
    argv = plan[0]['docker_argv']
    assert argv[argv.index('--publish') + 1] == '10.0.0.5:8000:8000'


@pytest.mark.parametrize('name', ['..', '.', '', '../../etc', 'a/b', '/etc', 'a..b', ' x', 'x\n', '-x', None, 5,
                                  ['x'], 'x' * 200])
@pytest.mark.parametrize('state', ['started', 'absent'])
def test_a_name_that_is_not_a_plain_name_is_refused_for_every_state(name, state):
    refused([{'name': name, 'state': state}], 'inference_server_instances[0].name')


@pytest.mark.parametrize('root, name, expected', [
    ('/etc/specdec', 'a', '/etc/specdec/a'), ('/etc/specdec', '..', None), ('/etc/specdec', '', None),
    ('/etc/specdec', 'a/../..', None), ('/etc/specdec', 'a/b', None), ('/etc/specdec/', 'a', '/etc/specdec/a'),
])
def test_contained_dir(root, name, expected):
    assert contained_dir(root, name) == expected


@pytest.mark.parametrize('changes, texts', [
    ({'state': 'stopped'}, ['.state', "'stopped'"]),
    ({'state': 'Absent'}, ['.state']),
    ({'image': None}, ['.image', 'required']),
    ({'image': 'Not An Image'}, ['.image']),
    ({'image': 'x\n'}, ['control character']),
    ({'gpus': 'some'}, ['.gpus', "'some'"]),
    ({'gpus': [0, 64]}, ['.gpus']),
    ({'gpus': [-1]}, ['.gpus']),
    ({'gpus': [True]}, ['.gpus']),
    ({'gpus': []}, ['.gpus']),
    ({'gpus': [0.5]}, ['.gpus']),
    ({'gpus': {'a': 1}}, ['.gpus']),
    ({'gpu_request': 'mig'}, ['.gpu_request']),
    ({'docker_args': ['--network=host']}, ['--network', 'DOCKER-USER']),
    ({'docker_args': ['--network', 'host']}, ['docker_args']),
    ({'docker_args': ['--net=host']}, ['docker_args']),
    ({'docker_args': ['--network=container:x']}, ['docker_args']),
    ({'docker_args': ['-p', '2222:22']}, ['docker_args']),
    ({'docker_args': ['-p2222:22']}, ['docker_args']),
    ({'docker_args': ['--publish=22:22']}, ['docker_args']),
    ({'docker_args': ['-P']}, ['docker_args']),
    ({'docker_args': ['--publish-all']}, ['docker_args']),
    ({'docker_args': ['--privileged']}, ['docker_args']),
    ({'docker_args': ['--cap-add=NET_ADMIN']}, ['docker_args']),
    ({'docker_args': '--shm-size=1g'}, ['docker_args', 'list of strings']),
    ({'docker_args': [5]}, ['docker_args']),
    ({'docker_args': ['--label=a\nExecStartPre=/bin/sh']}, ['control character']),
    ({'volumes': ['/data']}, ['.volumes', 'host:container']),
    ({'volumes': [':/data']}, ['.volumes']),
    ({'volumes': 'a:b'}, ['.volumes']),
    ({'health_timeout': 0}, ['.health_timeout', 'from 1 to 86400']),
    ({'health_timeout': 90000}, ['.health_timeout']),
    ({'health_timeout': 'long'}, ['.health_timeout']),
    ({'health_timeout': True}, ['.health_timeout']),
    ({'health_timeout': 1.5}, ['.health_timeout']),
    ({'restart_sec': 0}, ['.restart_sec']),
    ({'restart_sec': 4000}, ['.restart_sec']),
    ({'restart_sec': 'x'}, ['.restart_sec']),
    ({'health_generate': 'maybe'}, ['.health_generate']),
    ({'api_key': 'k'}, ['.api_key', 'vllm only']),
    ({'env': {'A': 'line\nbreak'}}, ['control character']),
    ({'env': {'A': 'nul\x00'}}, ['control character']),
    ({'model': 'x\ny'}, ['control character']),
    ({'port': 0}, ['port']),
    ({'port': 70000}, ['port']),
    ({'llm_api_options': {'enable_chunked_prefil': True}}, ['enable_chunked_prefil']),
    ({'speculative': {'method': 'eagle3', 'max_draft_len': 'five'}}, ['max_draft_len']),
])
def test_bad_instance_keys_are_refused_with_the_instance_named(changes, texts):
    refused([inst(**changes)], *texts)


def test_settings_defaults_are_checked_where_an_instance_sets_nothing():
    refused([TRT], '.docker_args', settings={'docker_args': ['--network=host']})
    refused([TRT], '.gpus', settings={'gpus': 'sometimes'})


@pytest.mark.parametrize('instances, text', [
    ([TRT, inst(port=8001)], 'names must be unique'),
    ([TRT, inst(name='b')], 'ports must be unique'),
    ([inst(gpus=[0, 1]), inst(name='b', port=8001, gpus=[1, 2])], 'must not overlap'),
    ('not a list', 'must be a list'),
    ([['a']], 'must be a mapping'),
])
def test_instances_together(instances, text):
    refused(instances, text)


def test_every_refusal_is_listed():
    err = refused([inst(state='x'), inst(name='..'), inst(name='c', port=9000, gpus='some')])
    assert len(err.errors) == 3


def test_an_absent_instance_needs_no_image_and_frees_its_port():
    plan = build_plan([TRT, {'name': 'b', 'state': 'absent', 'port': 8000}], SETTINGS)
    assert [e['state'] for e in plan] == ['started', 'absent']


@pytest.mark.parametrize('words, found', [
    (['--shm-size=1g', '--network=bridge'], None), (['--network', 'lab'], None),
    (['--network', 'host'], None), (['--network', 'container:x'], '--network'), (['-p8000:8000'], '-p8000:8000'), (['--init', '-P'], '-P'),
])
def test_bypass_option(words, found):
    result = bypass_option(words)
    assert (result[0] if result else None) == found


def test_published_ports():
    assert published_ports([TRT, inst(VLLM), {'name': 'x', 'state': 'absent', 'port': 9000}, {'name': 'd'}]) == [8000, 8001]


# --------------------------------------------------------------------------- the change list

def probe(units, files):
    return ['unit %s %s %s' % (u, a, e) for u, (a, e) in units.items()] + \
           ['file %s %s' % (p, w) for p, w in files.items()]


def test_nothing_to_change_when_the_host_matches():
    plan = build_plan([TRT], SETTINGS)
    want = {'/etc/specdec/gpt-oss-120b/engine.env': '600:root:root aaa'}
    lines = probe({'specdec-gpt-oss-120b.service': ('active', 'enabled')}, want)
    assert plan_changes(lines, plan, [want]) == []


def test_every_reason_is_named():
    plan = build_plan([TRT, {'name': 'old', 'state': 'absent'}], SETTINGS)
    want = {'/etc/specdec/gpt-oss-120b/engine.env': '600:root:root aaa',
            '/etc/specdec/gpt-oss-120b/engine.yaml': '644:root:root bbb'}
    lines = probe({'specdec-gpt-oss-120b.service': ('failed', 'disabled')},
                  {'/etc/specdec/gpt-oss-120b/engine.env': '600:root:root zzz', '/etc/specdec/old': 'dir -',
                   '/etc/ansible/facts.d/specdec_serving.fact': '755:root:root old'})
    changes = plan_changes(lines, plan, [want, {}], host_expected={
        '/etc/ansible/facts.d/specdec_serving.fact': ['755:root:root new', 'facts script']},
        to_fetch=[TRT['image']], fetch='pull')
    assert changes == [
        {'instance': 'gpt-oss-120b', 'reasons': ['image %s to pull' % TRT['image'], 'engine.env differs',
                                                 'engine.yaml absent', 'unit failed', 'unit not enabled',
                                                 'facts script']},
        {'instance': 'old', 'reasons': ['to remove']}]


def test_an_absent_instance_already_gone_is_no_change():
    plan = build_plan([{'name': 'old', 'state': 'absent'}], SETTINGS)
    assert plan_changes(probe({}, {'/etc/specdec/old': '- -'}), plan, [{}]) == []


def test_always_pull_changes_every_instance():
    plan = build_plan([TRT], SETTINGS)
    lines = probe({'specdec-gpt-oss-120b.service': ('active', 'enabled')}, {})
    assert plan_changes(lines, plan, [{}], always_pull=True) == [{'instance': 'gpt-oss-120b', 'reasons': ['image pull always']}]


def test_vllm_names_its_entrypoint_and_the_container_command_follows_the_image():
    # vllm/vllm-openai images declare ENTRYPOINT ["vllm", "serve"]: repeating `vllm serve` after the
    # image would make vLLM refuse `serve` as an unrecognized argument.
    trt, vllm = build_plan([TRT, VLLM], SETTINGS)
    argv = vllm['docker_argv']
    assert argv[argv.index('--entrypoint') + 1] == 'vllm'
    assert vllm['container_command'][0] == 'serve' and vllm['container_command'] == vllm['spec']['command'][1:]
    assert '--entrypoint' not in trt['docker_argv']
    assert trt['container_command'] == trt['spec']['command'] and trt['container_command'][0] == 'trtllm-serve'


def test_an_instance_the_published_fleet_plan_rendered_is_not_rendered_again(monkeypatch):
    from ansible_collections.specdec.serve.plugins.plugin_utils import _fleet, _serving_plan
    published = _fleet.fleet_plan([TRT, VLLM], {}, True)
    fresh = build_plan([TRT, VLLM], SETTINGS)
    rendered = []
    original = _serving_plan.render
    monkeypatch.setattr(_serving_plan, 'render', lambda inst, *a, **k: rendered.append(inst['name']) or original(inst, *a, **k))
    reused = build_plan([TRT, VLLM, inst(TRT, name='other', port=8002)], SETTINGS, published=published)
    assert rendered == ['other']  # only the instance the fleet plan does not hold
    assert reused[:2] == fresh  # the same plan as a render of its own
    # an instance that differs from what was published (a sweep's candidate) is rendered
    build_plan([inst(TRT, speculative=dict(TRT['speculative'], max_draft_len=5))], SETTINGS, published=published)
    assert rendered == ['other', 'gpt-oss-120b']
