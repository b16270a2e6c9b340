# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""spec_config and spec_profiles filters: thin wrappers over plugin_utils._spec_config.

The documentation of each filter is in the YAML file of the same name next to this one.
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


def spec_profiles(engine=None):
    """The named profiles (optionally of one engine): name -> engine, description, seeds, versions."""
    from ansible_collections.specdec.serve.plugins.plugin_utils._spec_profiles import list_profiles
    profiles = list_profiles()
    if engine in (None, ''):
        return profiles
    if engine not in ('trtllm', 'vllm'):
        raise AnsibleFilterError("spec_profiles: engine must be 'trtllm' or 'vllm', got %r" % (engine,))
    return dict((k, v) for k, v in profiles.items() if v['engine'] == engine)


class FilterModule(object):
    def filters(self):
        return {'spec_config': spec_config, 'spec_profiles': spec_profiles}
