# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""An alert's labels as a play gets them from an event (the tune loop's rulebooks: extensions/eda/rulebooks/).

The rulebook gives a play the alert's labels as extra vars, and an extra var is a template wherever a play
references it. So the actions that act on an alert (retune_guard, heal_guard) read them here, from the task's
variables as they were given, never templated, and refuse any that is not a plain name before anything else uses
it; a refusal shows the value bounded and with its braces and percent signs escaped, so that no message templates
it either.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.specdec.serve.plugins.plugin_utils._vocabulary import NAME_WORDS, is_name


class EventError(ValueError):
    """A label that is not a plain name; the message names the variable and shows the value escaped."""


def shown(value):
    """A hostile value shown in a message without anything a template would read: bounded, braces and percent
    signs escaped."""
    text = repr(value)
    text = text if len(text) <= 80 else text[:77] + '...'
    return text.replace('{', '\\x7b').replace('}', '\\x7d').replace('%', '\\x25')


def labels_from(task_vars, pairs, nothing):
    """{label: value} from the raw variables `pairs` names ((variable, label), ...), each a plain name.
    `nothing` ends the refusal: what was left untouched (e.g. 'nothing was re-tuned')."""
    out = {}
    for var, label in pairs:
        value = (task_vars or {}).get(var)
        # the type's own str(), never a template: a tagged or unsafe string is still a str
        if not isinstance(value, str) or not is_name(str(value)):
            raise EventError('%s: %s must be %s, the alert\'s label %s; %s'
                             % (var, shown(value), NAME_WORDS, label, nothing))
        out[label] = str(value)
    return out
