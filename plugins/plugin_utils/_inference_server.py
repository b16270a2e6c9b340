# -*- coding: utf-8 -*-
# Copyright: contributors to specdec.serve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the inference_server role's tasks decide, outside its task files:

- :func:`expected_files`: the files a run writes for an instance, as changes.yml compares them with the
  host's (``mode:owner:group sha1``, the form plugin_utils/_serving_plan.py's plan_changes reads);
- :func:`failure_message`: the report of an engine that did not become healthy, with what the
  rollback did.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib

SYSTEMD_DIR = '/etc/systemd/system/'


def _sha1(text):
    return hashlib.sha1(text.encode('utf-8', 'surrogateescape')).hexdigest()


def expected_files(instance, stat, env, unit, facts=None):
    """{path: 'mode:owner:group sha1'} of the files a run writes for ``instance`` (a serving_plan entry):
    engine.env (``env``), the unit file (``unit``), engine.yaml for TensorRT-LLM (the spec's
    ``config_yaml``), the MPI hostfile of a stack's head and, when ``facts`` (its text) is given, facts.json. ``stat`` maps each file
    ('engine.env', 'unit', 'engine.yaml', 'facts.json') to ``mode:owner:group`` as ``stat -c %a:%U:%G``
    prints it. An instance to remove expects none."""
    if instance.get('state') == 'absent':
        return {}
    directory = instance['dir']
    out = {directory + '/engine.env': '%s %s' % (stat['engine.env'], _sha1(env)),
           SYSTEMD_DIR + instance['unit']: '%s %s' % (stat['unit'], _sha1(unit))}
    spec = instance.get('spec') or {}
    if spec.get('engine') == 'trtllm':
        out[directory + '/engine.yaml'] = '%s %s' % (stat['engine.yaml'], _sha1(spec['config_yaml']))
    stack = instance.get('stack') or {}
    if stack.get('hostfile'):
        out[directory + '/hostfile'] = '%s %s' % (stat['hostfile'], _sha1(stack['hostfile']))
    if facts is not None:
        out[directory + '/facts.json'] = '%s %s' % (stat['facts.json'], _sha1(facts))
    return out


def _seconds(value):
    rounded = round(value if value is not None else 0, 1)
    return str(rounded)


def failure_message(failure, unit, rollback, can_roll_back, previous_health=None):
    """Why ``unit`` failed (the failed result's ``msg``) and what happened next: rollback off, nothing
    to go back to, the previous engine not healthy either (its health result's ``msg``), or the
    previous engine serving again (with its time to ready)."""
    failure = failure if isinstance(failure, dict) else {}
    previous = previous_health if isinstance(previous_health, dict) else {}
    head = '%s did not become healthy with the new configuration: %s' % (unit, failure.get('msg', '(no message)'))
    if not rollback:
        tail = 'Rollback is off (inference_server_rollback=false): the new files stay and the unit is stopped.'
    elif not can_roll_back:
        tail = ('There is no previous version to go back to (first start, or no file changed): the unit is stopped '
                'and disabled.')
    elif previous.get('stage', '') != 'ready':
        tail = ('The previous files are back, but the previous engine did not become healthy either: %s'
                % previous.get('msg', '(not checked)'))
    else:
        timings = previous.get('timings')
        if not isinstance(timings, dict):
            timings = {}
        tail = ('The previous files are back and the previous engine serves again (%s s to ready).'
                % _seconds(timings.get('total', 0)))
    return '%s %s' % (head, tail)
