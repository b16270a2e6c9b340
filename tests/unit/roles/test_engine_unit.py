"""inference_server's engine unit: every command line is quoted by the one quoting rule (plugin_utils/_quoting.py,
through the plan's unit_exec), never by a second copy of the rule in the template.

A converged host's unit stays byte for byte what it was, and a word with a space, a quote, a backslash, % and $
comes back from the unit as the same one word, read as systemd reads ExecStart= (specifiers and variables
undone, quotes and escapes removed)."""

from __future__ import annotations

import copy
import glob
import os
import re

import jinja2

from ansible_collections.specdec.serve.plugins.filter.quoting import quote_for
from ansible_collections.specdec.serve.plugins.plugin_utils._serving_plan import build_plan

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..'))
SETTINGS = {'config_dir': '/etc/specdec', 'gpus': 'all', 'gpu_request': 'gpus', 'docker_args': [],
            'health_timeout': 1800, 'restart_sec': 10, 'docker_bin': '/usr/bin/docker',
            'ulimits': {'memlock': -1, 'stack': 67108864}, 'models_dir': '/var/lib/specdec/models',
            'tiktoken_dir': '/var/lib/specdec/tiktoken', 'publish_address': ''}
UNIT_SETTINGS = dict(SETTINGS, firewall_unit='', drop_page_cache=True, start_limit_interval_sec=600,
                     start_limit_burst=5, stop_timeout=30, restart_max_delay_sec=300)
TRT = {'name': 'gpt-oss-120b', 'engine': 'trtllm', 'image': 'nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc6',
       'model': 'openai/gpt-oss-120b', 'port': 8000,
       'speculative': {'method': 'eagle3', 'draft_model': 'nvidia/gpt-oss-120b-Eagle3', 'max_draft_len': 3}}
HOSTILE = 'a b%c$d"e\\f'
VLLM = {'name': 'vllm-a', 'engine': 'vllm', 'image': 'vllm/vllm-openai:v0.11.0', 'model': 'openai/gpt-oss-120b',
        'port': 8001, 'extra_args': ['--chat-template=' + HOSTILE]}

# the unit of a converged host, as the role wrote it when the template quoted each word itself
CONVERGED = """# Ansible managed
# Engine instance gpt-oss-120b: trtllm 1.2.0rc6 serving /models/openai/gpt-oss-120b on port 8000
# image nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc6
[Unit]
Description=specdec engine gpt-oss-120b (trtllm 1.2.0rc6, speculative eagle3)
After=docker.service network-online.target
Requires=docker.service
Wants=network-online.target
StartLimitIntervalSec=600
StartLimitBurst=5

[Service]
Type=simple
# Unified memory (DGX Spark): start from an empty page cache; a failure here does not stop the start.
ExecStartPre=-/bin/sh -c "sync; echo 3 > /proc/sys/vm/drop_caches"
ExecStartPre=-/usr/bin/docker rm --force specdec-gpt-oss-120b
ExecStart=/usr/bin/docker run \\
    --rm \\
    --name specdec-gpt-oss-120b \\
    --pull=never \\
    --ipc=host \\
    --ulimit=memlock=-1 \\
    --ulimit=stack=67108864 \\
    --env-file /etc/specdec/gpt-oss-120b/engine.env \\
    --label specdec.instance=gpt-oss-120b \\
    --label specdec.image=nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc6 \\
    --volume /var/lib/specdec/models:/models:ro \\
    --volume /var/lib/specdec/tiktoken:/tiktoken:ro \\
    --volume /etc/specdec/gpt-oss-120b/engine.yaml:/etc/specdec/engine.yaml:ro \\
    --publish 8000:8000 \\
    --gpus all \\
    nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc6 \\
    trtllm-serve /models/openai/gpt-oss-120b \\
      --host 0.0.0.0 \\
      --port 8000 \\
      --backend pytorch \\
      --extra_llm_api_options /etc/specdec/engine.yaml
ExecStop=/usr/bin/docker stop --time 30 specdec-gpt-oss-120b
Restart=on-failure
RestartSec=10
TimeoutStartSec=300
TimeoutStopSec=60
SyslogIdentifier=specdec-gpt-oss-120b

[Install]
WantedBy=multi-user.target
"""


def render(entry, image_id='', systemd=252):
    # as ansible.builtin.template renders it: trim_blocks, the trailing newline kept
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(os.path.join(REPO, 'roles', 'inference_server', 'templates')),
                             trim_blocks=True, keep_trailing_newline=True, undefined=jinja2.StrictUndefined)
    env.filters['specdec.serve.quote_for'] = quote_for
    return env.get_template('engine.service.j2').render(
        _inference_server_instance=entry, _inference_server_image_id=image_id, _inference_server_settings=UNIT_SETTINGS,
        ansible_managed='Ansible managed', ansible_facts={'systemd': {'version': systemd}})


def systemd_words(line):
    """The words of an ExecStart= value as systemd reads them: continuations joined, split at unquoted blanks,
    double quotes and their backslash escapes removed, then %% and $$ undone."""
    text = re.sub(r' \\\n\s*', ' ', line)
    words, word, quoted, i, started = [], [], False, 0, False
    while i < len(text):
        ch = text[i]
        if quoted and ch == '\\':
            word.append(text[i + 1])
            i += 2
            continue
        if ch == '"':
            quoted, started = not quoted, True
        elif ch == ' ' and not quoted:
            if started:
                words.append(''.join(word))
            word, started = [], False
        else:
            word.append(ch)
            started = True
        i += 1
    if started:
        words.append(''.join(word))
    return [w.replace('%%', '%').replace('$$', '$') for w in words]


def exec_start(unit):
    return unit.split('ExecStart=', 1)[1].split('\nExecStop=', 1)[0]


def test_a_converged_host_keeps_its_unit_byte_for_byte():
    assert render(build_plan([copy.deepcopy(TRT)], SETTINGS)[0]) == CONVERGED


def test_a_hostile_word_comes_back_from_the_unit_as_the_same_one_word():
    entry = build_plan([copy.deepcopy(VLLM)], SETTINGS)[0]
    words = systemd_words(exec_start(render(entry, image_id='sha256:0123abcd')))
    assert words == entry['docker_argv'] + ['sha256:0123abcd'] + entry['container_command']
    assert '--chat-template=' + HOSTILE in words


def test_no_template_spells_a_quoting_rule_of_its_own():
    # the rule's own escapes (% written %%, $ written $$) belong to plugin_utils/_quoting.py alone
    spelled = [path for path in glob.glob(os.path.join(REPO, 'roles', '*', 'templates', '*.j2'))
               if re.search(r"""replace\(\s*['"][%$]['"]""", open(path, encoding='utf-8').read())]
    assert spelled == []
