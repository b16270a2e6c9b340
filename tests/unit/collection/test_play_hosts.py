"""A run's result does not depend on `-l`: what names other hosts comes from the inventory, never from the play.

The play's hosts (`ansible_play_hosts`, `ansible_play_hosts_all`, `ansible_play_batch`, the old `play_hosts`, and
the `play_hosts` parameters of the filters and functions that take them) may pick WHICH hosts act in this run,
or be checked to hold what must be in the play (refused, naming it, when it does not). They must never decide a
rule or a setting about other hosts: `site.yml -l lab-spark-01` after a full run once rewrote that host's input
rules without lab-spark-02's model-cache-peer rule, because the firewall built them from the play's hosts.

Every use in the roles' defaults, vars, meta, tasks, handlers and templates, the playbooks, and the filter,
plugin_utils and action plugins is listed below with why it is allowed, and how many times the file names it
(comments and docstrings count: a new use in a listed file fails too). A use not listed fails, and so does an
entry that no longer matches its file.
"""

from __future__ import annotations

import collections
import glob
import os
import re

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..'))

NAMES = ('ansible_play_hosts_all', 'ansible_play_hosts', 'ansible_play_batch', 'play_hosts')
# the longest name first, and whole words only (ansible_play_hosts is not counted inside ansible_play_hosts_all)
USE = re.compile(r'(?<![A-Za-z0-9_])(%s)(?![A-Za-z0-9_])' % '|'.join(NAMES))
SCANNED = (['roles/*/%s/**/*' % part for part in ('defaults', 'vars', 'meta', 'tasks', 'handlers', 'templates')]
           + ['playbooks/**/*.yml', 'playbooks/**/*.yaml']
           + ['plugins/%s/**/*.py' % part for part in ('filter', 'plugin_utils', 'action')])

# (file, name): (uses, why the play's hosts are right there)
ALLOWED = {
    ('roles/fleet_view/defaults/main.yml', 'ansible_play_hosts_all'):
        (1, 'fleet_view_hosts default: the hosts this run reports on (a view of the play, no rule about others)'),
    ('roles/fleet_view/meta/argument_specs.yml', 'ansible_play_hosts_all'):
        (1, "fleet_view_hosts default's owner (the spec), the same use"),
    ('plugins/plugin_utils/_roles/draft_sweep.py', 'play_hosts'):
        (2, "the sweep's stack entry: a stack's members must all be in the play to be swept together; checked and refused"),
    ('roles/inference_server/tasks/stack_preflight.yml', 'ansible_play_hosts_all'):
        (1, "stack preflight: a stack's members must be in the play and share a fresh view (a handled failure stays in)"),
    ('roles/firewall/tasks/validate.yml', 'ansible_play_hosts_all'):
        (1, "the seed's peers outside the play: their network facts are gathered, so the rules ignore the limit"),
    ('plugins/action/settings.py', 'ansible_play_hosts_all'):
        (1, "the planners' context: each planner's own use is listed (model_cache's peer seed check)"),
    ('plugins/action/settings.py', 'play_hosts'):
        (1, "the planners' context, given as play_hosts: the same"),
    ('plugins/plugin_utils/_roles/model_cache.py', 'play_hosts'):
        (2, 'the models to cache: the peer seed must be in the play (it downloads for its peers); checked and refused'),
    ('roles/model_cache/tasks/peer.yml', 'ansible_play_hosts'):
        (1, 'which hosts act: fill the caches only when some host of this run misses something'),
    ('roles/model_cache/tasks/peer_fill.yml', 'ansible_play_hosts'):
        (2, 'which hosts act: the seed fetches what the hosts of this run need, serves them only if one misses'),
    ('roles/rollout/tasks/batches.yml', 'ansible_play_hosts'):
        (1, 'which hosts act: the batches and the preview of the hosts this rollout changes'),
    ('playbooks/vars/fleet.yml', 'ansible_play_hosts_all'):
        (2, "rollout_statuses: the outcome of this run's hosts (the report of the play)"),
    ('plugins/plugin_utils/_model_cache.py', 'play_hosts'):
        (8, 'source_problems: refuses a peer seed outside the play, naming it and the play'),
    ('plugins/plugin_utils/_stack_serving.py', 'play_hosts'):
        (3, "preflight: refuses a stack whose members are not all in the play"),
    ('plugins/plugin_utils/_sweep_records.py', 'play_hosts'):
        (3, "stack_part: refuses a stack sweep whose members are not all in the play"),
}


def scan(root):
    """{(file, name): uses} of every use of the play's hosts under `root` (paths relative to it)."""
    found: collections.Counter = collections.Counter()
    for pattern in SCANNED:
        for path in sorted(glob.glob(os.path.join(root, pattern), recursive=True)):
            if not os.path.isfile(path):
                continue
            with open(path, encoding='utf-8', errors='replace') as handle:
                text = handle.read()
            for match in USE.finditer(text):
                found[(os.path.relpath(path, root), match.group(1))] += 1
    return dict(found)


def problems(found, allowed):
    """What differs between the uses found and the allow-list, one sentence each."""
    out = []
    for key, count in sorted(found.items()):
        if key not in allowed:
            out.append('%s uses %s (%d times), which the allow-list does not name: build what names other hosts '
                       'from the inventory (groups, hostvars), or list it here with why the play is right there'
                       % (key[0], key[1], count))
        elif allowed[key][0] != count:
            out.append('%s uses %s %d times, the allow-list says %d: justify the new use (or update the count)'
                       % (key[0], key[1], count, allowed[key][0]))
    out.extend('%s no longer uses %s: remove it from the allow-list' % key for key in sorted(set(allowed) - set(found)))
    return out


def test_every_use_of_the_play_hosts_is_allowed_with_a_reason():
    assert problems(scan(ROOT), ALLOWED) == []
    assert all(why.strip() and '\n' not in why for _count, why in ALLOWED.values())


def test_the_firewall_and_the_seed_default_do_not_read_the_play():
    found = scan(ROOT)
    for path in ('roles/firewall/defaults/main.yml', 'plugins/plugin_utils/_roles/firewall.py',
                 'roles/model_cache/defaults/main.yml', 'roles/model_cache/meta/argument_specs.yml',
                 'plugins/plugin_utils/_firewall.py', 'plugins/filter/firewall.py'):
        assert not [key for key in found if key[0] == path], path


def test_the_scanner_finds_a_planted_use(tmp_path):
    (tmp_path / 'roles' / 'x' / 'defaults').mkdir(parents=True)
    (tmp_path / 'roles' / 'x' / 'defaults' / 'main.yml').write_text(
        "x_seed: '{{ ansible_play_hosts_all | first }}'\nx_count: '{{ my_play_hosts_count }}'\n")
    (tmp_path / 'plugins' / 'plugin_utils').mkdir(parents=True)
    (tmp_path / 'plugins' / 'plugin_utils' / 'x.py').write_text(
        'def rules(play_hosts):\n    return [h for h in play_hosts]\n# ansible_play_batch\n')
    (tmp_path / 'playbooks').mkdir()
    (tmp_path / 'playbooks' / 'x.yml').write_text("- hosts: all\n  vars: {v: '{{ ansible_play_hosts }}'}\n")
    (tmp_path / 'docs').mkdir()
    (tmp_path / 'docs' / 'x.md').write_text('ansible_play_hosts_all (not scanned)\n')
    found = scan(str(tmp_path))
    assert found == {('roles/x/defaults/main.yml', 'ansible_play_hosts_all'): 1,
                     ('plugins/plugin_utils/x.py', 'play_hosts'): 2,
                     ('plugins/plugin_utils/x.py', 'ansible_play_batch'): 1,
                     ('playbooks/x.yml', 'ansible_play_hosts'): 1}
    said = problems(found, {('playbooks/x.yml', 'ansible_play_hosts'): (1, 'which hosts act'),
                            ('roles/y/tasks/main.yml', 'play_hosts'): (1, 'gone')})
    assert len(said) == 4, said
    assert said[-1] == 'roles/y/tasks/main.yml no longer uses play_hosts: remove it from the allow-list'
    assert any(s.startswith('roles/x/defaults/main.yml uses ansible_play_hosts_all (1 times), which the allow-list '
                            'does not name') for s in said), said
    # one more use in an allowed file fails too
    assert problems({('playbooks/x.yml', 'ansible_play_hosts'): 2},
                    {('playbooks/x.yml', 'ansible_play_hosts'): (1, 'which hosts act')}) == [
        'playbooks/x.yml uses ansible_play_hosts 2 times, the allow-list says 1: justify the new use (or update '
        'the count)']
