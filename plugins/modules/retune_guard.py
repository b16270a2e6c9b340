#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Documentation of the retune_guard action plugin (it runs on the controller only)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
module: retune_guard
short_description: The tune loop's decisions - whether an alert re-tunes its host now, what the re-tune found
version_added: "0.1.0"
author: specdec.serve maintainers (@specdec-serve)
description:
  - The decision of the tune loop (C(playbooks/retune.yml), run by the rulebook C(extensions/eda/rulebooks/retune.yml)
    when Alertmanager fires C(SpeculationStoppedPaying) for a host), made on the controller before anything changes.
  - The alert's host and instance are the variables C(retune_host) and C(retune_instance), which the rulebook gives
    the play as extra vars. They come from an event, so this action reads them as they were given, never as
    templates, and refuses any that is not a plain name (letters, digits and C(_ . -)) before anything else uses
    them; a refusal shows the value with its braces escaped.
  - The host's class is its one group among O(settings.classes) (the inventory's host-class groups). An alert for a
    host the inventory does not have, or that is in none or several of the classes, fails the task.
  - The guards, asked in this order; the first that refuses names itself and its numbers in RV(decision.reason).
    C(in_progress) refuses while a re-tune of the class is in progress (one per class at a time).
    C(cooldown) refuses while the class's last finished re-tune is more recent than the cool-down.
    C(capacity_floor) refuses when the class's hosts left serving (less those drained at a gateway, those being
    re-tuned and the host itself) would be fewer than O(settings.capacity_floor) of the class.
    C(backend) refuses when a gateway backend of the host already has a host drained (or being re-tuned),
    the host itself included, so that at most one host per backend is drained at a time.
  - When every guard passes, RV(decision.state) is the new state, with the class's C(in_progress) set to the host,
    the instance and the controller's time; the play writes it before it acts, and the step C(finish) clears it.
  - O(step=outcome) says what the re-tune's sweep found (RV(outcome)); O(step=finish) gives the state once the
    re-tune is over (RV(state)). Neither reads the alert's variables.
options:
  step:
    description:
      - C(decide), the guards' decision (RV(decision)); C(outcome), what the re-tune's sweep found, from O(before)
        and O(after); C(finish), the state once the re-tune of O(class) is over, from O(state).
    type: str
    choices: [decide, outcome, finish]
    default: decide
  state:
    description:
      - Per class, C(in_progress) (C({host, instance, since}) or null) and C(last_retune) (epoch seconds or null).
      - The mapping, or the text of the state file (JSON; empty text is no state yet).
      - With O(step=decide), left out, the action reads the state file (O(state_file)) on the controller; a file
        that is not there yet is no state. With O(step=finish), required (the state the decision returned).
    type: raw
  state_file:
    description:
      - The state file on the controller (C(retune_state_file), an absolute path); left out,
        C(/var/lib/specdec/retune/state.json). RV(state_path) returns it.
    type: str
  before:
    description: With O(step=outcome), the instance's entry of the host's sweep fact before the sweep.
    type: dict
  after:
    description: With O(step=outcome), the instance's entry of the host's sweep fact after the sweep.
    type: dict
  class:
    description: With O(step=finish), the class whose re-tune is over.
    type: str
  host:
    description: With O(step=finish), the host that was re-tuned (it must be the one the state says).
    type: str
  settings:
    description: The guards' settings; a key left out or null takes its default.
    type: dict
    suboptions:
      classes:
        description: The inventory groups that are host classes (C(retune_classes)).
        type: list
        elements: str
        default: [spark-nodes, b200-nodes]
      cooldown:
        description: The least time between two re-tunes of a class (C(retune_cooldown)), in seconds or a
          duration such as C(30m) or C(2h).
        type: raw
        default: 1h
      capacity_floor:
        description: The fraction of a class's hosts, from 0 to 1, that keep serving during a re-tune
          (C(retune_capacity_floor)).
        type: float
        default: 0.5
  backends:
    description:
      - The gateways' backends and their hosts (C(retune_backends)), a mapping of backend to hosts, or the
        C(backends) of the gateway role's published C(gateway_plan) (each with its C(servers)).
      - None given, the C(backend) guard has no backend to check (the reason says so).
    type: raw
  drained:
    description: Per backend, the hosts drained there now (C(retune_drained)).
    type: dict
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.flow
  - specdec.serve.attributes.controller
attributes:
  check_mode:
    details: It decides and changes nothing, so it decides in check mode as well.
'''

EXAMPLES = r'''
# retune_host and retune_instance come from the alert (extra vars of the rulebook's run)
- name: Ask the guards (the state file read on the controller)
  specdec.serve.retune_guard:
    state_file: /var/lib/specdec/retune/state.json
    settings: {cooldown: 2h, capacity_floor: 0.75}
    backends: {model_gpt-oss-120b: [spark-01, spark-02]}
    drained: {model_gpt-oss-120b: []}
  register: retune_guard_result

- name: Clear the class's re-tune once it is over
  specdec.serve.retune_guard:
    step: finish
    state: "{{ retune_guard_result.decision.state }}"
    class: "{{ retune_guard_result.decision['class'] }}"
    host: "{{ retune_guard_result.decision.host }}"
  register: retune_finished
'''

RETURN = r'''
state_path:
  description: With O(step=decide), the state file (O(state_file), else the default).
  returned: success, with step decide
  type: str
  sample: /var/lib/specdec/retune/state.json
outcome:
  description: With O(step=outcome), what the re-tune's sweep found.
  returned: success, with step outcome
  type: dict
  contains:
    changed:
      description: The sweep's winner is not what was served, so the class takes it (the rollout's canary path).
      type: bool
    outcome:
      description: C(re-verified), C(changed) or C(not applied).
      type: str
    before:
      description: The speculative settings served before the sweep (null when none was recorded).
      type: dict
    after:
      description: The speculative settings served after it.
      type: dict
    reason:
      description: One sentence, with the sweep's run and the draft lengths.
      type: str
state:
  description: With O(step=finish), the state once the re-tune is over (the class's C(in_progress) cleared, its
    C(last_retune) the controller's time).
  returned: success, with step finish
  type: dict
decision:
  description: With O(step=decide), the decision.
  returned: success, with step decide
  type: dict
  contains:
    act:
      description: Whether the host is re-tuned now.
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
    guard:
      description: The guard that refused (C(in_progress), C(cooldown), C(capacity_floor) or C(backend)); null when
        acting.
      type: str
    reason:
      description: One sentence that names the guard that refused, or every guard when acting, with the numbers.
      type: str
    state:
      description: When acting only, the new state (the class's C(in_progress) set).
      type: dict
  sample:
    act: true
    host: spark-01
    instance: gpt-oss-120b
    class: spark-nodes
    guard: null
    reason: "all guards pass: ..."
'''
