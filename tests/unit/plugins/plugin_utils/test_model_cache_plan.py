"""The model_cache role's list of models (its planner, plugin_utils/_roles/model_cache.py): named
models first, then the instances' models and draft models, each with the role's defaults, every repo id
checked before anything reaches a host."""

import pytest

from ansible_collections.specdec.serve.plugins.plugin_utils._checks import PlanRefusal
from ansible_collections.specdec.serve.plugins.plugin_utils._roles import model_cache


def model_cache_list(settings, play_hosts=None):
    return model_cache.PLANNERS['main'](settings, None, {'play_hosts': play_hosts})


def settings(models=(), instances=()):
    return {"models": list(models), "instances": list(instances), "default_revision": "main",
            "default_ignore_patterns": ["original/*"], "verify": "size", "refresh": False}


DEFAULTS = {"revision": "main", "allow_patterns": None, "ignore_patterns": ["original/*"], "verify": "size",
            "refresh": False}


def test_named_models_come_first_then_the_instances_models_and_drafts_each_once():
    got = model_cache_list(settings(
        models=["org/named", {"repo_id": "org/pinned", "revision": "v1", "verify": "sha256"}],
        instances=[{"name": "a", "model": "org/target", "speculative": {"draft_model": "org/draft"}},
                   {"name": "b", "model": "org/target"},
                   {"name": "c", "model": "org/pinned"},  # named above: the entry's revision wins
                   {"name": "d", "model": "/models/local", "speculative": {"draft_model": "/models/local-draft"}},
                   {"name": "e", "model": "org/other", "speculative": None}]))
    assert [m["repo_id"] for m in got] == ["org/named", "org/pinned", "org/target", "org/draft", "org/other"]
    assert got[0] == dict(DEFAULTS, repo_id="org/named")
    assert got[1] == dict(DEFAULTS, repo_id="org/pinned", revision="v1", verify="sha256")
    assert got[2] == dict(DEFAULTS, repo_id="org/target")


def test_nothing_to_cache_is_an_empty_list():
    assert model_cache_list(settings()) == []
    assert model_cache_list(settings(instances=[{"name": "a", "model": "/models/x"}])) == []


@pytest.mark.parametrize("instance, named", [
    ({"name": "bad", "model": "org/.."}, "model_cache_instances[0] (bad).model='org/..'"),
    ({"name": "bad", "model": "noslash"}, "model_cache_instances[0] (bad).model='noslash'"),
    ({"name": "bad", "model": "org/x", "speculative": {"draft_model": "../../etc"}},
     "model_cache_instances[0] (bad).speculative.draft_model='../../etc'"),
    ({"name": "bad", "model": ["org/x"]}, "model_cache_instances[0].model is a list"),
])
def test_a_bad_repo_id_of_an_instance_fails_naming_the_instance_and_the_value(instance, named):
    with pytest.raises(PlanRefusal) as err:
        model_cache_list(settings(instances=[instance]))
    assert named in str(err.value)


def test_an_instance_that_is_not_a_mapping_is_refused():
    with pytest.raises(PlanRefusal, match=r"model_cache_instances\[0\] is a str"):
        model_cache_list(settings(instances=["org/x"]))


@pytest.mark.parametrize("extra, hosts, said", [
    ({"source": "mirror", "mirror_endpoint": ""}, ["a"],
     ["model_cache_source=mirror needs model_cache_mirror_endpoint (it is empty)."]),
    # the seed, the play's hosts and what to do
    ({"source": "peer", "peer_seed": "gpu-99"}, ["a", "b"],
     ['model_cache_peer_seed="gpu-99" is not one of the play\'s hosts (a, b): the seed downloads for its peers in '
      'the same run; add gpu-99 to the limit (-l), or set model_cache_peer_seed to a host of the play.']),
    ({"source": "peer", "peer_seed": ""}, ["a"],
     ['model_cache_source=peer needs a seed, and model_cache_peer_seed is empty',
      'set model_cache_peer_seed to the host that downloads.']),
])
def test_a_source_the_play_cannot_use_is_refused_with_every_reason(extra, hosts, said):
    with pytest.raises(PlanRefusal) as err:
        model_cache_list(dict(settings(["org/x"]), **extra), hosts)
    for text in said:
        assert text in str(err.value)


@pytest.mark.parametrize("extra, hosts", [
    ({"source": "mirror", "mirror_endpoint": "https://mirror.example"}, ["a"]),
    ({"source": "peer", "peer_seed": "b"}, ["a", "b"]),
    ({"source": "hub", "peer_seed": "nowhere"}, ["a"]),
])
def test_a_source_the_play_can_use_lists_the_models(extra, hosts):
    assert [m["repo_id"] for m in model_cache_list(dict(settings(["org/x"]), **extra), hosts)] == ["org/x"]
