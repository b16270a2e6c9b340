# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The container_toolkit role's settings policy: what its argument spec cannot say (ranges, patterns, paths, the checks
that read another setting), one entry per setting, applied by the settings engine (plugin_utils/_settings.py); and
its judge of what a host reports: whether the toolkit there comes from elsewhere (:func:`origin`, the ``origin``
entry, which the settings action calls with the host's probes as ``reported``)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from typing import Any

from ansible_collections.specdec.serve.plugins.plugin_utils._checks import (
    PlanRefusal,
    apt_version,
    as_bool,
    each,
    fingerprint,
    host_path,
    image,
    name,
    no_climb,
    no_dotdot_name,
    non_empty,
    package,
)


POLICY: dict[str, Any] = {
    'container_toolkit_repo_url': {'url': 'container_toolkit_allow_http'},
    'container_toolkit_repo_key_url': {'url': 'container_toolkit_allow_http'},
    'container_toolkit_keyring': [host_path],
    'container_toolkit_repo_key_fingerprints': [non_empty, each(fingerprint)],
    'container_toolkit_preferences_file': [host_path],
    'container_toolkit_version': [apt_version],
    'container_toolkit_packages': [non_empty, each(package)],
    'container_toolkit_daemon_json_fragment': [no_dotdot_name],
    'container_toolkit_runtime_name': [name],
    'container_toolkit_runtime_path': [no_climb],
    'container_toolkit_smoke_test_image': [image],
    'container_toolkit_runtime_test_image': [image],
}


def why_elsewhere(found_sources, dgx_release=False, dpkg_status='', own_source=False, own_paths=()):
    """Why a host's NVIDIA container toolkit comes from elsewhere, so that the role leaves its repositories and
    packages alone; '' when the role may manage them.

    ``found_sources``: the apt source files that name the toolkit's repository; ``own_paths``: this role's source
    and the install guide's one-line file, which the role adopts (neither is foreign); ``own_source``: whether this
    role's source exists; ``dpkg_status``: ``dpkg-query --showformat='${Status}|${Version}' --show
    nvidia-container-toolkit``, empty or an error when the package is unknown."""
    if dgx_release:
        return 'DGX OS, /etc/dgx-release'
    foreign = [p for p in found_sources if p not in own_paths]
    if foreign:
        return 'NVIDIA apt source in %s' % ', '.join(foreign)
    # The install guide's one-line file is adopted only before the toolkit is installed from it: a host that
    # already has the toolkit through it (a DGX Spark as it ships: NVIDIA's keyring, NVIDIA's version) keeps
    # its source line, its keyring and its version.
    if dpkg_status.startswith('install ok installed') and not own_source:
        guide = [p for p in found_sources if p in own_paths]
        if guide:
            return ('nvidia-container-toolkit %s installed from the apt source of NVIDIA\'s install guide, %s'
                    % (dpkg_status.split('|')[-1], ', '.join(guide)))
        return 'nvidia-container-toolkit %s installed from another source' % dpkg_status.split('|')[-1]
    return ''


def origin(settings, warn=None, ctx=None):
    """Whether the role manages the toolkit's repositories and packages on this host: ``why`` (why the toolkit
    comes from elsewhere, '' when it does not) and ``manage`` (``manage_packages`` always, or auto and nothing
    elsewhere).

    ``ctx['reported']``: ``sources`` (the apt source files that name the toolkit's repository), ``dgx_release``
    (/etc/dgx-release exists), ``dpkg_status`` (dpkg-query's status line of nvidia-container-toolkit) and
    ``own_source`` (this role's source exists); ``ctx['vars']``: this role's source file and the install guide's,
    which are not foreign. PlanRefusal on a report of another shape."""
    ctx = ctx or {}
    reported, own = ctx.get('reported') or {}, ctx.get('vars') or {}
    sources, dpkg = reported.get('sources'), reported.get('dpkg_status') or ''
    own_paths = [own.get('_container_toolkit_source_file'), own.get('_container_toolkit_guide_list')]
    if not isinstance(sources, list) or not all(isinstance(p, str) for p in sources):
        raise PlanRefusal(['the apt sources found (reported.sources) must be a list of paths, got %r' % (sources,)])
    if not isinstance(dpkg, str):
        raise PlanRefusal(["dpkg-query's status (reported.dpkg_status) must be text, got %r" % (dpkg,)])
    why = why_elsewhere(sources, as_bool(reported.get('dgx_release'), False), dpkg,
                        as_bool(reported.get('own_source'), False),
                        [p for p in own_paths if isinstance(p, str)])
    return {'why': why, 'manage': settings['manage_packages'] == 'always'
            or (settings['manage_packages'] == 'auto' and not why)}


# the planners the settings action calls, by entry; the variables they read (this role's own paths)
PLANNERS = {'origin': origin}
PLAN_VARS = ('_container_toolkit_source_file', '_container_toolkit_guide_list')
