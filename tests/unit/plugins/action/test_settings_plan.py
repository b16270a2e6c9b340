"""The settings action returns a role's plan, decided once by the role's planner (plugin_utils/_roles/<role>.py).

The rollout role's plan is what a host serves (published by the role as the fact rollout_plan): every instance rendered
once, the instances with their API keys, never shown (the result is no_log), a refusal naming the instance and the
key with any secret hidden. draft_sweep's plan holds no secret and is shown like the settings; an entry point without
a planner returns none."""

from __future__ import annotations

from role_defaults import role_defaults  # tests/unit, on the test path
from settings_action import run  # tests/unit, on the test path
from ansible_collections.specdec.serve.plugins.plugin_utils import _fleet

KEY = 'sk-test-0123456789abcdef'
TRT = {'name': 'gpt-oss-120b', 'engine': 'trtllm', 'image': 'nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc6',
       'model': 'openai/gpt-oss-120b', 'port': 8000,
       'speculative': {'method': 'eagle3', 'draft_model': 'nvidia/gpt-oss-120b-Eagle3', 'max_draft_len': 3}}
VLLM = {'name': 'chat', 'engine': 'vllm', 'image': 'vllm/vllm-openai:v0.11.0', 'model': 'openai/gpt-oss-120b',
        'port': 8001, 'api_key': KEY}
SWEPT = {'specdec_sweep': {'gpt-oss-120b': {'applied': {
    'speculative': {'method': 'eagle3', 'draft_model': 'nvidia/gpt-oss-120b-Eagle3', 'max_draft_len': 5}}}}}


def test_what_a_host_serves_is_planned_once_per_instance_with_the_applied_winner_and_never_shown(monkeypatch):
    calls = []
    original = _fleet.render
    monkeypatch.setattr(_fleet, 'render', lambda inst, *a, **k: calls.append(inst['name']) or original(inst, *a, **k))
    out = run('rollout', 'plan', rollout_keep_sweep_winners=True, inference_server_instances=[TRT, VLLM],
              ansible_facts={'ansible_local': SWEPT})
    assert not out.get('failed'), out.get('msg')
    plan = out['plan']
    assert [i['name'] for i in plan['serving']] == ['gpt-oss-120b', 'chat']
    assert plan['serving'][0]['speculative']['max_draft_len'] == 5  # the sweep's winner, kept
    assert plan['instances'][1]['api_key'] == KEY  # carried to inference_server
    assert out['_ansible_no_log'] is True  # so never shown, at any verbosity
    assert sorted(calls) == ['chat', 'gpt-oss-120b', 'gpt-oss-120b']  # the declared method read once, then one render each
    assert plan['models'] == ['openai/gpt-oss-120b', 'nvidia/gpt-oss-120b-Eagle3']


def test_the_winner_is_not_kept_when_the_setting_says_so():
    out = run('rollout', 'plan', rollout_keep_sweep_winners=False, inference_server_instances=[TRT],
              ansible_facts={'ansible_local': SWEPT})
    assert out['plan']['serving'][0]['speculative']['max_draft_len'] == 3


def test_a_bad_instance_is_refused_naming_it_and_its_key_with_the_secret_hidden():
    bad = dict(VLLM, port=KEY)
    out = run('rollout', 'plan', rollout_keep_sweep_winners=True, inference_server_instances=[bad])
    assert out['failed'] is True
    assert out['msg'].startswith('rollout refused on the controller (no host was changed):\n- inference_server_instances')
    assert "'chat'" in out['msg'] and 'port must be a TCP port' in out['msg']
    assert KEY not in out['msg']


def test_a_plan_without_secrets_is_returned_with_the_settings_and_an_entry_without_a_planner_has_none():
    sweep = run('draft_sweep', draft_sweep_instance='gpt-oss-120b', draft_sweep_instances=[TRT],
                **dict(_sweep_defaults()))
    assert not sweep.get('failed'), sweep.get('msg')
    assert sweep['plan']['engine'] == 'trtllm' and '_ansible_no_log' not in sweep
    adopt = run('draft_sweep', 'adopt', draft_sweep_adopted={})
    assert not adopt.get('failed') and 'plan' not in adopt


def _sweep_defaults():
    return role_defaults('draft_sweep', 'draft_sweep_instance', 'draft_sweep_instances')


def test_the_exporter_is_planned_on_the_hosts_inventory_address_without_the_instances_keys():
    values = dict(role_defaults('monitoring_exporter'), monitoring_exporter_instances=[TRT, VLLM])
    out = run('monitoring_exporter', ansible_host='10.0.0.5', inventory_hostname='fleet-01', **values)
    assert not out.get('failed'), out.get('msg')
    plan = out['plan']
    assert plan['config']['listen'] == '10.0.0.5' and plan['url'] == 'http://10.0.0.5:9470'
    assert [(i['name'], i['engine'], i['url']) for i in plan['config']['instances']] == [
        ('gpt-oss-120b', 'trtllm', 'http://127.0.0.1:8000'), ('chat', 'vllm', 'http://127.0.0.1:8001')]
    assert plan['exec'] == '/usr/bin/python3 /usr/local/lib/specdec/specdec_exporter.py --config /etc/specdec/exporter.json'
    assert plan['validate'] == '/usr/bin/python3 /usr/local/lib/specdec/specdec_exporter.py --check --config %s'
    assert KEY not in str(out)
    # monitoring_address outranks ansible_host; a bad setting is refused naming it
    assert run('monitoring_exporter', monitoring_address='10.9.0.1', ansible_host='10.0.0.5',
               **values)['plan']['config']['listen'] == '10.9.0.1'
    bad = run('monitoring_exporter', ansible_host='10.0.0.5', **dict(values, monitoring_exporter_port=70000))
    assert bad['failed'] is True and 'monitoring_exporter_port' in bad['msg']


def test_another_role_reading_a_roles_settings_gets_them_without_a_plan():
    # the monitoring role reads the exporter's port and poll interval, on a host where the exporter is not planned
    values = dict(role_defaults('monitoring_exporter'))
    out = run('monitoring_exporter', own='monitoring', **values)
    assert not out.get('failed'), out.get('msg')
    assert 'plan' not in out and out['port'] == 9470
    assert 'plan' in run('monitoring_exporter', own='monitoring_exporter', ansible_host='10.0.0.5',
                         monitoring_exporter_instances=[], **values)


def test_an_entry_that_judges_reads_what_the_host_reported_and_the_inventory():
    # stack_link's layout: the members' link addresses from hostvars, the default route from the facts, netplan
    # from what the host reported
    run_with = dict(stack_link_group='pair', stack_link_interface='enp1s0f0np0', stack_link_address='10.9.0.1/24',
                    stack_link_head='', stack_link_mtu=9000, stack_link_manager='auto', stack_link_verify_wait=30,
                    inventory_hostname='a', groups={'all': ['a', 'b'], 'pair': ['a', 'b']},
                    hostvars={'a': {'stack_link_address': '10.9.0.1/24'}, 'b': {'stack_link_address': '10.9.0.2/24'}},
                    ansible_facts={'default_ipv4': {'interface': 'eth0'}})

    def layout(netplan, **over):
        return run('stack_link', 'layout', reported={'netplan': netplan}, **dict(run_with, **over))

    out = layout(False)
    assert not out.get('failed'), out.get('msg')
    assert out['plan']['peers'] == [{'host': 'b', 'address': '10.9.0.2'}] and out['plan']['manager'] == 'networkd'
    assert layout(True)['plan']['manager'] == 'netplan'
    # the interface of the default route is refused, naming the variable
    refused = layout(False, stack_link_interface='eth0')
    assert refused['failed'] is True and 'stack_link_interface' in refused['msg'] and 'eth0' in refused['msg']


def test_the_gateway_plan_reads_the_inventory_refuses_naming_each_variable_and_is_never_shown():
    engine = dict(TRT, name='gpt-oss-120b')
    inventory = dict(role_defaults('gateway'), gateway_engine_hosts=['e1', 'e2'], gateway_api_keys=[KEY],
                     groups={'all': ['gw', 'e1', 'e2'], 'gateways': ['gw']},
                     hostvars={'e1': {'inference_server_instances': [engine], 'gateway_backend_address': '10.0.0.1'},
                               'e2': {'inference_server_instances': [engine], 'gateway_backend_address': '10.0.0.2'}})
    out = run('gateway', 'plan', **inventory)
    assert not out.get('failed'), out.get('msg')
    assert out['_ansible_no_log'] is True  # the keys' digests: never shown
    assert out['plan']['summary'] == ['gpt-oss-120b: e1:gpt-oss-120b, e2:gpt-oss-120b']
    # a bad key: refused naming its index and rule, never the key; shown (the refusal holds no secret)
    bad = run('gateway', 'plan', **dict(inventory, gateway_api_keys=[KEY, 'short']))
    assert bad['failed'] is True and 'gateway_api_keys[1]' in bad['msg'] and 'short' not in bad['msg']
    assert KEY not in bad['msg'] and '_ansible_no_log' not in bad
    # an engine host without an address: refused naming it
    noaddr = dict(inventory, hostvars=dict(inventory['hostvars'], e2={'inference_server_instances': [engine]}))
    refused = run('gateway', 'plan', **noaddr)
    assert refused['failed'] is True and 'e2' in refused['msg'], refused['msg']
    # no engine serves anything: nothing to route
    idle = run('gateway', 'plan', **dict(inventory, hostvars={'e1': {}, 'e2': {}}))
    assert idle['failed'] is True and 'no engine host serves any instance' in idle['msg'], idle['msg']


def test_the_monitoring_plan_is_shown_and_its_web_configuration_never():
    values = dict(role_defaults('monitoring'), monitoring_web_users={'ops': 'a-long-password-0123'},
                  groups={'all': ['mon'], 'monitoring': ['mon']}, hostvars={'mon': {}}, inventory_hostname='mon')
    out = run('monitoring', **values)
    assert not out.get('failed'), out.get('msg')
    assert '_ansible_no_log' not in out and out['plan']['cfg']['web_users'] == ['ops']
    assert 'a-long-password-0123' not in repr(out)
    assert out['plan']['rules']['groups']
    # the tune loop (its own role) is off by default: Alertmanager posts to no webhook
    assert 'loop' not in out['plan'] and 'webhook_configs' not in out['plan']['alertmanager']['receivers'][0]
    web = run('monitoring', 'web', **values)
    assert not web.get('failed'), web.get('msg')
    assert web['_ansible_no_log'] is True and '$2b$' in web['plan']  # bcrypt hashes, never shown
