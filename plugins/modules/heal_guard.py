#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Documentation of the heal_guard action plugin (it runs on the controller only)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
module: heal_guard
short_description: The heal's decisions - whether a wedged engine is restarted now, and what a heal left
version_added: "0.1.0"
author: specdec.serve maintainers (@specdec-serve)
description:
  - The decision of the heal (C(playbooks/heal.yml), run by the tune loop's rulebook when Alertmanager fires
    C(SpecdecEngineWedged) for an engine), made on the controller before anything changes.
  - The alert's host and instance are the variables C(heal_host) and C(heal_instance), which the rulebook gives the
    play as extra vars. They come from an event, so this action reads them as they were given, never as templates,
    and refuses any that is not a plain name (letters, digits and C(_ . -)) before anything else uses them; a refusal
    shows the value with its braces escaped. C(heal_by_hand) (a person's C(-e), never the rulebook's) is read the
    same way and must be true or false.
  - The engine is the instance on the host or, for an instance served across a stack (its C(stack) group), every
    member of the stack, its workers first and its head last (RV(decision.hosts)).
  - The host's class is its one group among O(settings.classes). An alert for a host the inventory does not have, for
    an instance the host does not serve, or for a host in none or several of the classes, fails the task.
  - The guards, asked in this order; the first that refuses names itself and its numbers in RV(decision.reason).
    C(in_progress) refuses while a heal of the class is in progress (one per class at a time).
    C(restart_limit) refuses an engine restarted O(settings.restart_limit) times within O(settings.window), or one a
    heal left drained; RV(decision.drain) is then true - the play drains its hosts and leaves them so, and the alert
    stays firing for a person. C(heal_by_hand) skips this guard.
    C(capacity_floor) refuses when the class's hosts left serving (less those a heal left drained, those being healed
    and the engine's own) would be fewer than O(settings.capacity_floor) of the class.
  - When the state changes (acting or draining), RV(decision.state) is the new state; the play writes it before it
    acts. O(step=finish) gives the state once the heal is over (RV(state)), and O(step=record) what the engine's
    hosts show of it (RV(record), their local fact C(specdec_heal)).
options:
  step:
    description:
      - C(decide), the guards' decision (RV(decision)); C(finish), the state once the heal of O(decision) is over,
        with O(outcome); C(record), what the hosts of O(decision)'s engine show, from O(state).
    type: str
    choices: [decide, finish, record]
    default: decide
  state:
    description:
      - C(classes) (per class, C(in_progress)) and C(engines) (per engine, C(restarts), C(drained), C(hosts),
        C(last_heal)) - the mapping, or the text of the state file (JSON; empty text is no state yet).
      - With O(step=decide), left out, the action reads the state file (O(state_file)) on the controller; a file that
        is not there yet is no state. With O(step=finish) and O(step=record), required.
    type: raw
  state_file:
    description:
      - The state file on the controller (C(heal_state_file), an absolute path); left out,
        C(/var/lib/specdec/retune/heal.json). RV(state_path) returns it.
    type: str
  decision:
    description: With O(step=finish) and O(step=record), the decision O(step=decide) returned.
    type: dict
  outcome:
    description: With O(step=finish), what the heal ended with.
    type: str
    choices: [restarted, failed, left drained]
  settings:
    description: The guards' settings; a key left out or null takes its default.
    type: dict
    suboptions:
      classes:
        description: The inventory groups that are host classes (C(heal_classes)).
        type: list
        elements: str
        default: [spark-nodes, b200-nodes]
      capacity_floor:
        description: The fraction of a class's hosts, from 0 to 1, that keep serving during a heal
          (C(heal_capacity_floor)).
        type: float
        default: 0.5
      restart_limit:
        description: The most restarts of one engine within O(settings.window) (C(heal_restart_limit)).
        type: int
        default: 2
      window:
        description: The window the restarts are counted in (C(heal_window)), seconds or a duration such as C(1h).
        type: raw
        default: 1h
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.flow
  - specdec.serve.attributes.controller
attributes:
  check_mode:
    details: It decides and changes nothing, so it decides in check mode as well.
'''

EXAMPLES = r'''
# heal_host and heal_instance come from the alert (extra vars of the rulebook's run)
- name: Ask the guards (the state file read on the controller)
  specdec.serve.heal_guard:
    state_file: /var/lib/specdec/retune/heal.json
    settings: {restart_limit: 2, window: 1h, capacity_floor: 0.5}
  register: heal_guard_result

- name: The state once the engine serves again
  specdec.serve.heal_guard:
    step: finish
    state: "{{ heal_guard_result.decision.state }}"
    decision: "{{ heal_guard_result.decision }}"
    outcome: restarted
  register: heal_finished
'''

RETURN = r'''
state_path:
  description: With O(step=decide), the state file (O(state_file), else the default).
  returned: success, with step decide
  type: str
  sample: /var/lib/specdec/retune/heal.json
state:
  description: With O(step=finish), the state once the heal is over (the class's C(in_progress) cleared; the
    engine's restart counted, C(drained) unless it serves again, C(last_heal) the controller's time).
  returned: success, with step finish
  type: dict
record:
  description: With O(step=record), what the engine's hosts show of it.
  returned: success, with step record
  type: dict
  contains:
    restarts:
      description: The heal's restarts of the engine within the window.
      type: int
    restarted_at:
      description: Their times (UTC).
      type: list
      elements: str
    drained:
      description: Whether a heal left the engine drained (past its restart limit, or not healthy after its restart).
      type: bool
    last_heal:
      description: The last heal - C(at) (UTC), C(outcome) and C(reason).
      type: dict
decision:
  description: With O(step=decide), the decision.
  returned: success, with step decide
  type: dict
  contains:
    act:
      description: Whether the engine is restarted now.
      type: bool
    drain:
      description: Not restarted, past its restart limit - its hosts are drained and stay so.
      type: bool
    host:
      description: The alert's host.
      type: str
    instance:
      description: The alert's engine instance.
      type: str
    class:
      description: The host's class.
      type: str
    engine:
      description: The engine's key in the state, C(HEAD/INSTANCE).
      type: str
    hosts:
      description: Every host the engine runs on, a stack's workers first and its head last.
      type: list
      elements: str
    stack:
      description: The stack's group, or null for an instance served alone.
      type: str
    restarts:
      description: The engine's restarts within the window, before this heal.
      type: int
    guard:
      description: The guard that refused (C(in_progress), C(restart_limit) or C(capacity_floor)); null when acting.
      type: str
    reason:
      description: One sentence that names the guard that refused, or every guard when acting, with the numbers.
      type: str
    state:
      description: When acting or draining, the new state.
      type: dict
  sample:
    act: true
    drain: false
    host: spark-01
    instance: gpt-oss-120b
    class: spark-nodes
    engine: spark-01/gpt-oss-120b
    hosts: [spark-02, spark-01]
    stack: stack_a
    guard: null
    reason: "all guards pass: ..."
'''
