"""The sweep's workloads: checked and typed on the controller, one owner for their keys."""

import pytest

from ansible_collections.specdec.serve.plugins.plugin_utils import _sweep_workloads as sw
from ansible_collections.specdec.serve.plugins.plugin_utils._settings import SettingsError, check_settings

DEFAULTS = {"prompt_set": "mixed", "max_tokens": 256, "temperature": 0.0, "ignore_eos": False}
OPTIONS = {"draft_sweep_workloads": {"type": "list", "elements": "dict"},
           "draft_sweep_workload_rule": {"type": "str"}}


def test_no_workloads_is_one_named_default_made_of_the_flat_settings():
    out = sw.resolve([], DEFAULTS)
    assert out["rule"] == "worst_case"
    (w,) = out["workloads"]
    assert w["name"] == "default" and w["prompt_set"] == "mixed" and w["max_tokens"] == 256
    assert w["prompts"] is None and w["request_rate"] is None and w["arrival"] == "poisson" and w["seed"] == 0


def test_values_are_typed_as_the_command_line_gives_them_and_unset_keys_inherit():
    (w,) = sw.resolve([{"name": "open", "request_rate": "2.5", "temperature": "0.7", "top_p": "0.9",
                        "ignore_eos": "yes", "input_len": {"mean": "128"}, "output_len": {"mean": 64}}],
                      DEFAULTS)["workloads"]
    assert w["request_rate"] == 2.5 and w["temperature"] == 0.7 and w["top_p"] == 0.9 and w["ignore_eos"] is True
    assert w["input_len"]["mean"] == 128 and w["input_len"]["distribution"] == "fixed"
    assert w["max_tokens"] == 256 and w["prompt_set"] == "mixed"


@pytest.mark.parametrize("entry,message", [
    ({"name": "a", "temperature": 3}, "[0] (a).temperature: 3 must be from 0.0 to 2.0"),
    ({"name": "a", "top_p": 0}, "[0] (a).top_p: 0 must be above 0.0 to 1.0"),
    ({"name": "a", "request_rate": -1}, "[0] (a).request_rate: -1 must be above 0.0"),
    ({"name": "a", "prompt_set": "poems"}, "[0] (a).prompt_set: 'poems' must be one of mixed, vacation"),
    ({"name": "a", "prompts": []}, "[0] (a).prompts: [] must be a non-empty list of non-empty strings"),
    ({"name": "a", "prompts": ["x"], "dataset": "f.jsonl"}, "[0] (a): prompts and dataset are exclusive"),
    ({"name": "a", "dataset_num": 5}, "[0] (a).dataset_num: is only for a dataset"),
    ({"name": "a", "input_len": {"distribution": "zipf"}}, "[0] (a).input_len: {'distribution': 'zipf'} input_len.distribution must be one of"),
    ({"name": "a", "ignore_eos": "perhaps"}, "[0] (a).ignore_eos: 'perhaps' must be a boolean"),
    ({"name": "../x"}, "[0].name: '../x' must be a name"),
    ({"name": "a", "colour": "red"}, "[0]: unknown key(s) colour; allowed: arrival, dataset"),
    ("code", "[0]: 'code' must be a mapping"),
])
def test_bad_workloads_are_refused_naming_the_entry_the_key_and_what_is_allowed(entry, message):
    assert message in sw.check([entry])
    with pytest.raises(sw.WorkloadsError, match="draft_sweep_workloads"):
        sw.resolve([entry], DEFAULTS)


def test_the_settings_check_refuses_them_before_a_host_is_touched():
    with pytest.raises(SettingsError) as err:
        check_settings(OPTIONS, {"draft_sweep_workloads": [{"name": "a"}, {"name": "a"}],
                                 "draft_sweep_workload_rule": "fastest"})
    text = str(err.value)
    assert "draft_sweep_workloads: [1] (a).name: 'a' is used by another workload" in text
    assert "draft_sweep_workload_rule: 'fastest' must be worst_case, mean or workload:NAME" in text
    ok = check_settings(OPTIONS, {"draft_sweep_workloads": [{"name": "a"}], "draft_sweep_workload_rule": "workload:a"})
    assert ok["draft_sweep_workload_rule"] == "workload:a"


def test_a_rule_naming_a_workload_must_name_one_of_them():
    assert sw.resolve([{"name": "a"}, {"name": "b"}], DEFAULTS, "workload:b")["rule"] == "workload:b"
    with pytest.raises(sw.WorkloadsError, match="'workload:c' names no workload; the workloads are a, b"):
        sw.resolve([{"name": "a"}, {"name": "b"}], DEFAULTS, "workload:c")


def test_a_workload_name_is_a_plain_name_of_the_one_vocabulary():
    from ansible_collections.specdec.serve.plugins.plugin_utils import _vocabulary as vocabulary
    longest = "w" * vocabulary.NAME_MAX
    (w,) = sw.resolve([{"name": longest}], DEFAULTS)["workloads"]
    assert w["name"] == longest
    for bad in (longest + "w", "-lead", "a b"):
        with pytest.raises(sw.WorkloadsError) as err:
            sw.resolve([{"name": bad}], DEFAULTS)
        assert vocabulary.NAME_WORDS in str(err.value)
    assert sw.resolve([{"name": longest}], DEFAULTS, "workload:" + longest)["rule"] == "workload:" + longest
