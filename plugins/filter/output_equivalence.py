# -*- coding: utf-8 -*-
# Copyright: contributors to specdec.serve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""equivalence_verdict and equivalence_summary filters: the output-equivalence gate of a sweep.

The documentation lives in equivalence_verdict.yml and equivalence_summary.yml next to this file;
the logic in plugins/plugin_utils/_output_equivalence.py, shared with the unit tests.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.validation import check_type_bool

# The implementation is imported inside the filters, not here (docs/ARCHITECTURE.md, "Filter files").


def _eq():
    from ansible_collections.specdec.serve.plugins.plugin_utils import _output_equivalence as output_equivalence
    return output_equivalence


def _min_prefix(value):
    if value is None or value == '':
        return None
    if isinstance(value, bool):
        raise _eq().EquivalenceError('min_prefix must be null or an integer >= 1, got %r' % (value,))
    return int(value)


def equivalence_verdict(probe, baseline=None, draft_len=0, min_prefix=None, enabled=True, error=None):
    eq = _eq()
    try:
        return eq.candidate_verdict(baseline or None, probe or None, int(draft_len),
                                    min_prefix=_min_prefix(min_prefix), enabled=check_type_bool(enabled),
                                    error=str(error) if error else None)
    except (eq.EquivalenceError, TypeError, ValueError) as exc:
        raise AnsibleFilterError('equivalence_verdict: %s' % exc)


def equivalence_summary(verdicts, enabled=True, min_prefix=None, baseline=None, baseline_measured=True,
                        prompts=None, max_tokens=None):
    eq = _eq()
    try:
        return eq.summarize(list(verdicts or []), enabled=check_type_bool(enabled),
                            min_prefix=_min_prefix(min_prefix), baseline=baseline or None,
                            baseline_measured=check_type_bool(baseline_measured), prompts=prompts,
                            max_tokens=max_tokens)
    except (eq.EquivalenceError, TypeError, ValueError, KeyError) as exc:
        raise AnsibleFilterError('equivalence_summary: %s' % exc)


class FilterModule(object):
    def filters(self):
        return {'equivalence_verdict': equivalence_verdict, 'equivalence_summary': equivalence_summary}
