"""What each host serves is decided once per play: every serving instance is rendered once per host and play.

The scenario's playbook runs count every render of an instance on the controller (tests/render_count, enabled by
SPECDEC_RENDER_LOG in molecule.yml). This file runs before the others, so what it reads is the converge (site.yml
and the monitoring playbook) and the idempotence run: the fleet's own plays, on every host of the class."""

import json
import os
import time
from collections import Counter

STARTED = time.time()
LOG = os.path.join(os.environ.get('MOLECULE_EPHEMERAL_DIRECTORY', ''), 'renders.jsonl')
ENGINE_HOSTS = {'fleet-01', 'fleet-02', 'fleet-03'}


def _renders():
    with open(LOG, encoding='utf-8') as handle:
        lines = [json.loads(line) for line in handle if line.strip()]
    return [line for line in lines if line['time'] < STARTED]


def test_every_instance_is_rendered_once_per_host_and_play():
    renders = _renders()
    runs = {line['run'] for line in renders}
    # the converge and the idempotence run, each rendering on every engine host
    assert len(runs) >= 2, 'renders of %d playbook runs logged in %s' % (len(runs), LOG)
    for run in runs:
        assert {line['host'] for line in renders if line['run'] == run} >= ENGINE_HOSTS
    counts = Counter((line['run'], line['play'], line['host'], line['instance'], line['digest']) for line in renders)
    again = dict(('%s / %s / %s' % (play, host, instance), n) for (run, play, host, instance, digest), n in counts.items()
                 if n > 1)
    assert again == {}, 'rendered more than once in a play (play / host / instance: renders): %s' % again


def test_the_controller_main_process_renders_nothing():
    # a render outside a task's worker would be the strategy templating a play-level expression, once per host
    # and task
    assert [line for line in _renders() if line['host'] is None] == []
