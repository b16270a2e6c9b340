#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: engine_health
short_description: Wait until an LLM engine serves, or fail at once with its unit state and last log lines
version_added: "0.1.0"
author: specdec.serve maintainers (@specdec-serve)
description:
  - Polls an OpenAI-compatible inference engine (C(trtllm-serve) or C(vllm serve)) on the target host until
    it is ready, in stages - the port accepts a TCP connection, C(GET /health) answers 200,
    C(GET /v1/models) lists the expected model id and, optionally, a one-token C(POST /v1/chat/completions)
    succeeds.
  - At every poll it also watches the systemd unit (C(systemctl show)) and the docker container
    (C(docker inspect)) that run the engine. When the unit has failed, is not running, or restarted, or the
    container exited, was restarted or disappeared, the module fails at once, not after O(timeout), with the
    unit and container state and the engine's last O(log_lines) log lines (C(docker logs --tail), else
    C(journalctl -u UNIT -n N)).
  - Only reads; never changes anything (it always returns C(changed=false)), so it runs the same in check mode.
  - Uses the Python standard library and ansible-core's C(ansible.module_utils.urls) only. Requests go to the
    engine directly, never through a proxy the host's environment sets, and no C(~/.netrc) credentials are sent.
options:
  url:
    description:
      - Base URL of the engine, without a path.
    type: str
    default: http://127.0.0.1:8000
  model:
    description:
      - The model id that C(/v1/models) must list (the spec_config filter returns it as C(health_model_id)).
      - When omitted, any non-empty model list passes, and the generation probe uses the first id.
    type: str
  generate:
    description:
      - Also require a one-token chat completion (C(max_tokens=1), C(temperature=0)) to succeed. This catches
        an engine whose HTTP server answers while its executor is dead.
    type: bool
    default: false
  api_key:
    description:
      - Bearer token sent on the C(/v1) endpoints (vLLM C(--api-key)).
    type: str
  api_key_env_file:
    description:
      - Read the key from C(VLLM_API_KEY) in this environment file (C(KEY=VALUE) lines, as C(docker run --env-file)
        reads them), instead of O(api_key). A file without C(VLLM_API_KEY) means no key.
      - For an C(async) task, whose arguments stay on the host's disk while it runs, so the key is read on the host
        from the file the engine itself reads (the C(inference_server) role passes the instance's C(engine.env)).
    type: path
    version_added: "0.1.0"
  timeout:
    description:
      - Seconds to wait for the whole sequence before failing.
    type: float
    default: 900
  interval:
    description:
      - Seconds between polls.
    type: float
    default: 0.2
  request_timeout:
    description:
      - Seconds allowed for one HTTP request or TCP connect.
    type: float
    default: 5
  unit:
    description:
      - The systemd unit that runs the engine, for example C(specdec-gpt-oss-120b.service). Watched at every poll.
    type: str
  container:
    description:
      - The docker container that runs the engine, for example C(specdec-gpt-oss-120b). Watched at every poll.
      - A container that does not exist yet is waited for (the unit may still be pulling the image); one that
        existed and then disappeared is a failure.
    type: str
  log_lines:
    description:
      - How many of the engine's last log lines to return (and show) on failure.
    type: int
    default: 50
  validate_certs:
    description:
      - Verify the TLS certificate when O(url) is https.
    type: bool
    default: true
  version:
    description:
      - Also ask C(GET /version) (served by C(trtllm-serve) and C(vllm serve), without an API key) when the module
        ends, ready or not, and return its C(version) field as RV(engine_version).
      - RV(engine_version) is null when the engine does not answer it.
    type: bool
    default: false
    version_added: "0.1.0"
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - specdec.serve.attributes.read_only
notes:
  - Engines bind their port before loading the model but answer HTTP only when the model is loaded, so
    the TCP stage may pass long before C(/health) does.
  - NRestarts and the container id are taken at the first poll; any later restart counts as a failure.
  - The collection's C(docs/engine_health.md) describes the stages, the failure detection and the timings.
seealso:
  - module: specdec.serve.serve_bench
'''

EXAMPLES = r'''
- name: Wait for the engine to serve the model
  specdec.serve.engine_health:
    url: http://127.0.0.1:8000
    model: gpt-oss-120b
    unit: specdec-gpt-oss-120b.service
    container: specdec-gpt-oss-120b
    generate: true
    timeout: 1800

- name: Check a vLLM endpoint that needs an API key
  specdec.serve.engine_health:
    url: "http://127.0.0.1:{{ item.port }}"
    model: "{{ item.served_model_name }}"
    api_key: "{{ vault_vllm_api_key }}"
    timeout: 60
  loop: "{{ rendered_instances }}"
  register: health

- name: Show how long the engine took to become ready
  ansible.builtin.debug:
    msg: "{{ health.results | map(attribute='timings') }}"
'''

RETURN = r'''
timings:
  description:
    - Seconds from the start of the module to each stage; C(null) for a stage not reached or not asked for.
  returned: always
  type: dict
  contains:
    tcp_accept:
      description: Seconds to the first accepted TCP connection.
      type: float
    health:
      description: Seconds to the first C(GET /health) answered 200.
      type: float
    models:
      description: Seconds to the first C(/v1/models) that listed the model.
      type: float
    generate:
      description: Seconds to the first successful one-token generation (null unless O(generate)).
      type: float
    total:
      description: Seconds the module ran.
      type: float
  sample: {"tcp_accept": 0.41, "health": 95.2, "models": 95.21, "generate": 95.6, "total": 95.6}
engine_version:
  description: The C(version) field of the engine's C(GET /version), or null when it did not answer it.
  returned: when O(version) is true
  type: str
  sample: "1.2.0rc2"
models:
  description: The model ids that C(/v1/models) listed.
  returned: always
  type: list
  elements: str
  sample: ["gpt-oss-120b"]
stage:
  description: The last stage reached (C(tcp), C(health), C(models), C(generate) or C(ready)).
  returned: always
  type: str
  sample: ready
unit_state:
  description: The last C(systemctl show) properties of O(unit) (empty without O(unit)).
  returned: always
  type: dict
  sample: {"ActiveState": "active", "SubState": "running", "NRestarts": "0", "ExecMainStatus": "0"}
container_state:
  description: The last C(docker inspect) State of O(container) (empty without O(container) or before it exists).
  returned: always
  type: dict
  sample: {"Status": "running", "ExitCode": 0, "OOMKilled": false}
log_lines:
  description: The engine's last log lines; filled only on failure.
  returned: failure
  type: list
  elements: str
url:
  description: The base URL polled.
  returned: always
  type: str
  sample: http://127.0.0.1:8000
'''

import json
import socket
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.six.moves.urllib.error import HTTPError, URLError
from ansible.module_utils.six.moves.urllib.parse import urlparse
from ansible.module_utils.urls import ConnectionError as UrlConnectionError, open_url

UNIT_PROPS = ('LoadState', 'ActiveState', 'SubState', 'Result', 'NRestarts', 'ExecMainStatus')


class EngineDown(Exception):
    """The unit or the container says the engine is not going to come up."""


class Watcher:
    """Reads the systemd unit and the docker container state; raises EngineDown on a crash."""

    def __init__(self, module, unit, container):
        self.module = module
        self.unit = unit
        self.container = container
        self.systemctl = module.get_bin_path('systemctl', required=bool(unit)) if unit else None
        self.docker = module.get_bin_path('docker', required=bool(container)) if container else None
        self.unit_state = {}
        self.container_state = {}
        self.restarts0 = None
        self.container_id = None
        self.container_restarts0 = 0  # set with container_id, by the first docker inspect

    def _unit(self):
        rc, out, err = self.module.run_command([self.systemctl, 'show', self.unit, '-p', ','.join(UNIT_PROPS)])
        if rc != 0:
            raise EngineDown('systemctl show %s failed (rc=%d): %s' % (self.unit, rc, (err or out).strip()))
        state = {}
        for line in out.splitlines():
            key, sep, value = line.partition('=')
            if sep:
                state[key.strip()] = value.strip()
        self.unit_state = state
        if state.get('LoadState') == 'not-found':
            raise EngineDown('unit %s does not exist' % self.unit)
        active, sub = state.get('ActiveState', ''), state.get('SubState', '')
        restarts = int(state.get('NRestarts') or 0)
        if self.restarts0 is None:
            self.restarts0 = restarts
        if active == 'failed':
            raise EngineDown('unit %s failed (%s, result %s, exit status %s)'
                             % (self.unit, sub, state.get('Result'), state.get('ExecMainStatus')))
        if sub == 'auto-restart' or restarts > self.restarts0:
            raise EngineDown('unit %s restarted (NRestarts %d -> %d, last exit status %s)'
                             % (self.unit, self.restarts0, restarts, state.get('ExecMainStatus')))
        if active in ('inactive', 'deactivating'):
            raise EngineDown('unit %s is not running (%s/%s, exit status %s)'
                             % (self.unit, active, sub, state.get('ExecMainStatus')))

    def _container(self):
        rc, out, err = self.module.run_command([self.docker, 'inspect', '--type', 'container', self.container])
        if rc != 0:
            if self.container_id is not None:
                raise EngineDown('container %s disappeared (it had been running as %s)'
                                 % (self.container, self.container_id[:12]))
            return  # not created yet: the unit may still be pulling the image
        try:
            info = json.loads(out)[0]
        except (ValueError, IndexError, TypeError):
            raise EngineDown('cannot read docker inspect %s: %s' % (self.container, out[:200]))
        state = info.get('State') or {}
        self.container_state = state
        cid, restarts = info.get('Id'), int(info.get('RestartCount') or 0)
        if self.container_id is None:
            self.container_id, self.container_restarts0 = cid, restarts
        status = state.get('Status')
        detail = 'exit code %s%s%s' % (state.get('ExitCode'), ', OOM killed' if state.get('OOMKilled') else '',
                                       (', error: %s' % state['Error']) if state.get('Error') else '')
        if status in ('exited', 'dead'):
            raise EngineDown('container %s %s (%s)' % (self.container, status, detail))
        if status == 'restarting' or restarts > self.container_restarts0:
            raise EngineDown('container %s restarted (%d restarts, %s)' % (self.container, restarts, detail))
        if cid != self.container_id:
            raise EngineDown('container %s was replaced (%s -> %s): the engine restarted'
                             % (self.container, self.container_id[:12], (cid or '')[:12]))

    def check(self):
        if self.unit:
            self._unit()
        if self.container:
            self._container()

    def logs(self, count):
        if self.container and self.docker:
            rc, out, err = self.module.run_command([self.docker, 'logs', '--tail', str(count), self.container])
            text = (out or '') + (err or '')
            if rc == 0 and text.strip():
                return text.splitlines()[-count:]
        if self.unit and self.systemctl:
            journalctl = self.module.get_bin_path('journalctl')
            if journalctl:
                rc, out, err = self.module.run_command([journalctl, '-u', self.unit, '-n', str(count), '--no-pager'])
                if rc == 0:
                    return out.splitlines()[-count:]
                return ['(journalctl failed: %s)' % (err or out).strip()]
        return []


class Prober:
    def __init__(self, url, api_key, request_timeout, validate_certs):
        self.url = url.rstrip('/')
        parsed = urlparse(self.url)
        if parsed.scheme not in ('http', 'https') or not parsed.hostname:
            raise ValueError('url must be http(s)://host[:port], got %r' % url)
        self.host = parsed.hostname
        self.port = parsed.port or (443 if parsed.scheme == 'https' else 80)
        self.api_key = api_key
        self.timeout = request_timeout
        self.validate_certs = validate_certs

    def tcp(self):
        sock = socket.create_connection((self.host, self.port), timeout=self.timeout)
        sock.close()

    def request(self, method, path, body=None, auth=False):
        headers = {'Accept': 'application/json'}
        data = None
        if body is not None:
            data = json.dumps(body).encode('utf-8')
            headers['Content-Type'] = 'application/json'
        if auth and self.api_key:
            headers['Authorization'] = 'Bearer %s' % self.api_key
        try:
            # the engine is asked directly: no proxy, no ~/.netrc credentials
            resp = open_url(self.url + path, data=data, headers=headers, method=method, use_proxy=False,
                            timeout=self.timeout, validate_certs=self.validate_certs, use_netrc=False,
                            http_agent='specdec.serve-engine_health')
            return resp.getcode(), resp.read().decode('utf-8', 'replace')
        except HTTPError as exc:
            try:
                text = exc.read().decode('utf-8', 'replace')
            except Exception:
                text = ''
            return exc.code, text
        except UrlConnectionError as exc:
            # a certificate that does not verify, as any other failed connection: waited on, then reported
            raise IOError(str(exc))


def _short(text, limit=300):
    text = ' '.join((text or '').split())
    return text if len(text) <= limit else text[:limit] + '...'


def read_env_key(module, path, name):
    """The value of NAME in an env file (KEY=VALUE lines, '#' comments), as docker --env-file reads it; None if absent."""
    try:
        with open(path) as handle:
            lines = handle.read().splitlines()
    except (IOError, OSError) as exc:
        module.fail_json(msg='cannot read api_key_env_file %s: %s' % (path, exc.strerror))
    value = None
    for line in lines:
        key, sep, rest = line.partition('=')
        if sep and not key.lstrip().startswith('#') and key.strip() == name:
            value = rest
    if value:
        module.no_log_values.add(value)
    return value or None


def main():
    module = AnsibleModule(
        argument_spec=dict(
            url=dict(type='str', default='http://127.0.0.1:8000'),
            model=dict(type='str'),
            generate=dict(type='bool', default=False),
            api_key=dict(type='str', no_log=True),
            api_key_env_file=dict(type='path'),
            timeout=dict(type='float', default=900),
            interval=dict(type='float', default=0.2),
            request_timeout=dict(type='float', default=5),
            unit=dict(type='str'),
            container=dict(type='str'),
            log_lines=dict(type='int', default=50),
            validate_certs=dict(type='bool', default=True),
            version=dict(type='bool', default=False),
        ),
        mutually_exclusive=[['api_key', 'api_key_env_file']],
        supports_check_mode=True,
    )
    p = module.params
    if p['api_key_env_file']:
        p['api_key'] = read_env_key(module, p['api_key_env_file'], 'VLLM_API_KEY')
    for key in ('timeout', 'interval', 'request_timeout'):
        if p[key] <= 0:
            module.fail_json(msg='%s must be > 0, got %s' % (key, p[key]))
    if p['log_lines'] < 0:
        module.fail_json(msg='log_lines must be >= 0, got %s' % p['log_lines'])
    try:
        prober = Prober(p['url'], p['api_key'], p['request_timeout'], p['validate_certs'])
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    watcher = Watcher(module, p['unit'], p['container'])

    start = time.monotonic()
    timings = dict(tcp_accept=None, health=None, models=None, generate=None, total=None)
    models: list[str] = []
    stage = 'tcp'
    last_error = 'no answer yet'

    def elapsed():
        return round(time.monotonic() - start, 3)

    def engine_version():
        try:
            code, body = prober.request('GET', '/version')
            return json.loads(body).get('version') if code == 200 else None
        except (IOError, OSError, socket.error, URLError, ValueError, AttributeError):
            return None

    def result(**extra):
        timings['total'] = elapsed()
        out = dict(changed=False, timings=timings, models=models, stage=stage, url=prober.url,
                   unit_state=watcher.unit_state, container_state=watcher.container_state)
        if p['version']:
            out['engine_version'] = engine_version()
        out.update(extra)
        return out

    def fail(msg):
        lines = watcher.logs(p['log_lines']) if p['log_lines'] else []
        where = ' and '.join(x for x in (p['container'] and 'container %s' % p['container'],
                                         p['unit'] and 'unit %s' % p['unit']) if x) or 'the engine'
        if lines:
            msg = '%s\n--- last %d log lines of %s ---\n%s' % (msg, len(lines), where, '\n'.join(lines))
        module.fail_json(msg=msg, log_lines=lines, **result())

    while True:
        try:
            watcher.check()
        except EngineDown as exc:
            fail('engine at %s is down while waiting for %s: %s' % (prober.url, stage, exc))
        try:
            if stage == 'tcp':
                prober.tcp()
                timings['tcp_accept'] = elapsed()
                stage = 'health'
            if stage == 'health':
                code, body = prober.request('GET', '/health')
                if code != 200:
                    raise IOError('GET /health answered %d %s' % (code, _short(body)))
                timings['health'] = elapsed()
                stage = 'models'
            if stage == 'models':
                code, body = prober.request('GET', '/v1/models', auth=True)
                if code in (401, 403):
                    why = 'wrong' if p['api_key'] else 'missing (set api_key)'
                    fail('GET /v1/models answered %d: the API key is %s' % (code, why))
                if code != 200:
                    raise IOError('GET /v1/models answered %d %s' % (code, _short(body)))
                try:
                    models = [str(m.get('id')) for m in json.loads(body).get('data', [])]
                except (ValueError, AttributeError):
                    raise IOError('GET /v1/models answered 200 with no model list: %s' % _short(body))
                if p['model'] is not None and p['model'] not in models:
                    raise IOError("/v1/models does not list '%s' (it lists: %s)" % (p['model'], ', '.join(models)))
                if not models:
                    raise IOError('/v1/models lists no model yet')
                timings['models'] = elapsed()
                stage = 'generate' if p['generate'] else 'ready'
            if stage == 'generate':
                body = {'model': p['model'] or models[0], 'max_tokens': 1, 'temperature': 0, 'stream': False,
                        'messages': [{'role': 'user', 'content': 'hi'}]}
                code, text = prober.request('POST', '/v1/chat/completions', body=body, auth=True)
                if code in (400, 401, 403, 404, 422):
                    fail('POST /v1/chat/completions answered %d: %s' % (code, _short(text)))
                if code != 200:
                    raise IOError('POST /v1/chat/completions answered %d %s' % (code, _short(text)))
                try:
                    choices = json.loads(text).get('choices')
                except (ValueError, AttributeError):
                    choices = None
                if not choices:
                    raise IOError('POST /v1/chat/completions answered 200 without choices: %s' % _short(text))
                timings['generate'] = elapsed()
                stage = 'ready'
        except (IOError, OSError, socket.error, URLError, ValueError) as exc:
            last_error = str(getattr(exc, 'reason', None) or exc)
        if stage == 'ready':
            module.exit_json(**result())
        if time.monotonic() - start >= p['timeout']:
            fail('engine at %s not ready after %ss: still waiting for %s; last error: %s'
                 % (prober.url, p['timeout'], stage, last_error))
        time.sleep(p['interval'])


if __name__ == '__main__':
    main()
