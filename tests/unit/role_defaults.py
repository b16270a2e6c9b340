"""A role's defaults as the unit tests give them to the settings action: roles/<role>/defaults/main.yml (generated
from the role's argument spec), without the defaults that are templates (they read other variables, which a unit
test sets itself where it needs them)."""

from __future__ import annotations

import os

import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))


def role_defaults(role, *leave_out):
    """{variable: default} of the role, leaving out templated defaults and the names in ``leave_out``."""
    with open(os.path.join(ROOT, 'roles', role, 'defaults', 'main.yml'), encoding='utf-8') as handle:
        return dict((k, v) for k, v in (yaml.safe_load(handle) or {}).items()
                    if '{{' not in str(v) and k not in leave_out)
