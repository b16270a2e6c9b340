"""The sweep's decisions as the unit tests call them: plugin_utils' selection, schedule, output-equivalence gate
and sampling check, each with the name it has in the draft_sweep planner's refusals (plugins/plugin_utils/
_roles/draft_sweep.py) and one exception, Refused, for what any of them refuses; and the role's settings as the
settings action types them, for its planner's entries (``settings``, ``entry``)."""

import os

import yaml

from ansible_collections.specdec.serve.plugins.module_utils.bench_sampling import SamplingError, check_sampling
from ansible_collections.specdec.serve.plugins.plugin_utils import _output_equivalence as eq
from ansible_collections.specdec.serve.plugins.plugin_utils._bench_select import SelectError, select_workloads
from ansible_collections.specdec.serve.plugins.plugin_utils._role_spec import load_options
from ansible_collections.specdec.serve.plugins.plugin_utils._roles.draft_sweep import PLANNERS
from ansible_collections.specdec.serve.plugins.plugin_utils._settings import check_settings, typed_settings
from ansible_collections.specdec.serve.plugins.plugin_utils._sweep_schedule import schedule_plan, schedule_verdict

# an instance that names only a vLLM profile: the profile gives it its engine, model, method and draft model
VLLM_PROFILE_ONLY = {'name': 'chat', 'image': 'vllm/vllm-openai:v0.11.0', 'profile': 'vllm-gpt-oss-120b-eagle3'}
TRT = {'name': 'gpt-oss-120b', 'engine': 'trtllm', 'image': 'nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc6',
       'model': 'openai/gpt-oss-120b', 'port': 8355,
       'speculative': {'method': 'eagle3', 'draft_model': 'nvidia/gpt-oss-120b-Eagle3', 'max_draft_len': 3}}
DEFAULTS = os.path.join(os.path.dirname(__file__), '..', '..', 'roles', 'draft_sweep', 'defaults', 'main.yml')


def settings(**values):
    """draft_sweep's settings as the settings action types them (the role's defaults where a value is not given)."""
    with open(DEFAULTS, encoding='utf-8') as handle:
        raw = dict((key, value) for key, value in yaml.safe_load(handle).items() if '{{' not in str(value))
    values.setdefault('instances', [VLLM_PROFILE_ONLY, TRT])
    raw.update(('draft_sweep_' + key, value) for key, value in values.items())
    return typed_settings('draft_sweep', check_settings(load_options('draft_sweep'), raw))


def entry(name, given=None, **reported):
    """A draft_sweep planner entry as the settings action calls it, with what the host reported."""
    return PLANNERS[name](given or settings(instance='gpt-oss-120b'), None, {'reported': reported})


class Refused(Exception):
    """A decision refused its input (the planner raises PlanRefusal with the same words)."""


def _refused(name, function, *args, **kwargs):
    try:
        return function(*args, **kwargs)
    except (SelectError, SamplingError, eq.EquivalenceError, KeyError, TypeError, ValueError) as exc:
        raise Refused('%s: %s' % (name, exc))


def draft_select(measurements, rule=None, **kwargs):
    # no rule: the role's default, which select_workloads reads from the spec
    return _refused('draft_select', select_workloads, measurements, rule=rule, **kwargs)


def sweep_schedule_plan(result, apply_schedule=True):
    return _refused('sweep_schedule_plan', schedule_plan, result, apply_schedule)


def sweep_schedule_verdict(result, served, plan):
    return _refused('sweep_schedule_verdict', schedule_verdict, result, served, plan)


def equivalence_verdict(probe, baseline=None, draft_len=0, min_prefix=None, enabled=True, error=None):
    return _refused('equivalence_verdict', eq.candidate_verdict, baseline or None, probe or None, int(draft_len),
                    min_prefix=min_prefix, enabled=enabled, error=error)


def equivalence_summary(verdicts, **kwargs):
    return _refused('equivalence_summary', eq.summarize, list(verdicts or []), **kwargs)


def sampling_check(serving, temperature=0.0, allow_greedy_fallback=False, **kwargs):
    return _refused('sampling_check', check_sampling, serving, temperature, allow_greedy_fallback, **kwargs)
