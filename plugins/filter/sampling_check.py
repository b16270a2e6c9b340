# -*- coding: utf-8 -*-
# Copyright: contributors to specdec.serve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""sampling_check filter: does the engine of an instance honour a benchmark's sampling settings?

The documentation lives in sampling_check.yml next to this file; the logic in
plugins/module_utils/bench_sampling.py, shared with the serve_bench module and the unit tests.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.validation import check_type_bool

# The implementation is imported inside the filters, not here (docs/ARCHITECTURE.md, "Filter files").


def sampling_check(serving, temperature=0.0, allow_greedy_fallback=False,
                   temperature_setting='temperature', fallback_setting='allow_greedy_fallback'):
    from ansible_collections.specdec.serve.plugins.module_utils.bench_sampling import SamplingError, check_sampling
    try:
        return check_sampling(serving, temperature, check_type_bool(allow_greedy_fallback),
                              temperature_setting=str(temperature_setting),
                              fallback_setting=str(fallback_setting))
    except (SamplingError, TypeError) as exc:
        raise AnsibleFilterError('sampling_check: %s' % exc)


class FilterModule(object):
    def filters(self):
        return {'sampling_check': sampling_check}
