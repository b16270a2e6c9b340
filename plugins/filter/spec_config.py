# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""spec_config filter: a thin wrapper over plugin_utils._spec_config.

The documentation of the filter is in the YAML file of the same name next to this one. The named profiles' listing
(profiles_for) is plugin_utils._spec_profiles's alone; docs/spec_config.md lists the profiles.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError
from ansible.utils.display import Display

# The implementation is imported inside the filters, not here (docs/ARCHITECTURE.md, "Filter files").


def spec_config(instance, models_dir=None, config_path=None, ignore_keys=None):
    """Engine-neutral instance -> engine config, config_yaml, args, command, env, model ids."""
    from ansible_collections.specdec.serve.plugins.plugin_utils import _spec_config as impl
    try:
        out = impl.render(instance, models_dir=impl.DEFAULT_MODELS_DIR if models_dir is None else models_dir,
                          config_path=impl.DEFAULT_CONFIG_PATH if config_path is None else config_path,
                          ignore_keys=ignore_keys)
    except impl.SpecConfigError as exc:
        raise AnsibleFilterError('spec_config: %s' % exc)
    for text in out['warnings']:
        Display().warning('spec_config: %s' % text)
    return out


class FilterModule(object):
    def filters(self):
        return {'spec_config': spec_config}
