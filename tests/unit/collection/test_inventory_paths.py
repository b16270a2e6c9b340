# -*- coding: utf-8 -*-
"""Every path setting that the shipped inventories (inventories/*) and the molecule scenarios give passes the
settings check as the role's settings action runs it: templated as Ansible templates them (the lab inventory's
lab_dir is ``inventory_dir ~ '/../../lab'``, a path with '..' in it, as a user writes one), then checked.

The inventories' variables are read from their group_vars and host_vars files (and the scenarios' vars files), the
environment a scenario's run has (molecule's directories, SPECDEC_LAB_DIR) set as molecule sets it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

import json
import subprocess
import sys

from ansible_collections.specdec.serve.plugins.plugin_utils import _role_spec as role_spec
from ansible_collections.specdec.serve.plugins.plugin_utils import _settings as S

REPO = Path(__file__).resolve().parents[3]
INVENTORIES = sorted(p for p in (REPO / "inventories").iterdir() if p.is_dir())
SCENARIOS = sorted(p for p in (REPO / "molecule").iterdir() if (p / "molecule.yml").exists())
# what a lab host's facts say (the lab inventory reads its gateway from them)
FACTS = {"default_ipv4": {"gateway": "172.29.0.1", "network": "172.29.0.0", "prefix": "24", "address": "172.29.0.11"},
         "architecture": "x86_64"}


class Vault(yaml.SafeLoader):
    """YAML with Ansible's !vault and !unsafe tags read as plain text (no setting here is vaulted)."""


Vault.add_constructor("!vault", lambda loader, node: "(vaulted)")
Vault.add_constructor("!unsafe", lambda loader, node: loader.construct_scalar(node))


def var_files(top):
    """The YAML variable files under an inventory or a scenario (group_vars, host_vars, *vars*.yml), vaulted
    files left out."""
    out = []
    for path in sorted(top.rglob("*.yml")):
        rel = path.relative_to(top).parts
        if "group_vars" in rel or "host_vars" in rel or (len(rel) == 1 and "vars" in path.stem):
            if not path.read_text().startswith("$ANSIBLE_VAULT"):
                out.append(path)
    return out


def trusted(value):
    """A value read from an inventory file, its strings templates as the inventory's are (ansible-core 2.19 renders
    a string read from a file only once it is trusted; 2.18 renders every string)."""
    try:
        from ansible.template import trust_as_template
    except ImportError:
        return value
    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, dict):
        return dict((k, trusted(v)) for k, v in value.items())
    if isinstance(value, list):
        return [trusted(v) for v in value]
    return value


def variables(top):
    merged = {}
    for path in var_files(top):
        data = yaml.load(path.read_text(), Loader=Vault) or {}
        if isinstance(data, dict):
            merged.update(data)
    return merged


def path_settings():
    """Every role setting that is a path: type path, a controller path, or one path per architecture."""
    out = set(S.CONTROLLER_PATHS) | set(S.PER_ARCHITECTURE)
    for role in role_spec.roles():
        for name, option in role_spec.load_options(role).items():
            if (option or {}).get("type") == "path":
                out.add(name)
    return out


PATHS = path_settings()


def templated(top, inventory_dir, names):
    """The variables ``names`` of the files under ``top``, templated by Ansible with its plugins (lookups), in this
    process: run by given_paths in a process of its own, so that loading Ansible's plugins here does not change how
    the other tests import this collection."""
    from ansible.parsing.dataloader import DataLoader
    from ansible.plugins.loader import init_plugin_loader
    from ansible.template import Templar

    init_plugin_loader()
    found = variables(top)
    if top.parent.name == "molecule":
        # a scenario's inventory links the lab's group_vars (molecule.yml links)
        found = dict(variables(REPO / "inventories" / "lab"), **found)
    found = trusted(found)
    templar = Templar(loader=DataLoader(), variables=dict(found, inventory_dir=str(inventory_dir), ansible_facts=FACTS,
                                                          groups={}, hostvars={}))
    return [(name, templar.template(found[name])) for name in sorted(set(found) & set(names))]


def given_paths(top, inventory_dir, env):
    """(setting, templated value) of every path setting the files under ``top`` give, with ``env`` set."""
    proc = subprocess.run([sys.executable, __file__, str(top), str(inventory_dir), json.dumps(sorted(PATHS))],
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), **env), capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [tuple(pair) for pair in json.loads(proc.stdout)]


def check(name, value, given):
    """The setting checked as the settings action checks it, with the settings its rules read (a certificate's
    key) as given."""
    values = {name: value}
    for rule in S.POLICY.get(name) or []:
        needs = getattr(rule, "needs", None)
        if needs:
            values[needs] = given.get(needs, role_spec.default(needs))
    typed = S.check_settings(dict((n, role_spec.option(n)) for n in values), values)[name]
    if name in S.PER_ARCHITECTURE:
        for machine in ("x86_64", "aarch64"):
            S.for_architecture({name: typed}, machine)
    return typed


@pytest.mark.parametrize("inventory", INVENTORIES, ids=lambda p: p.name)
def test_every_path_an_inventory_gives_passes_the_settings_check(inventory):
    paths = given_paths(inventory, inventory, {})
    for name, value in paths:
        check(name, value, dict(paths))
    if inventory.name == "lab":
        # the lab's paths climb out of the inventory ('..'), as a user's may: accepted, and used normalised
        archive = dict(paths)["inference_server_image_archive"]
        assert "/../" in archive
        resolved = S.for_architecture({"inference_server_image_archive": check("inference_server_image_archive", archive, {})},
                                      "x86_64")["inference_server_image_archive"]
        assert resolved == str(REPO / "lab" / ".cache" / "images" / "engine-emulators.tar")


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda p: p.name)
def test_every_path_a_scenario_gives_passes_the_settings_check(scenario, tmp_path):
    env = {"MOLECULE_PROJECT_DIRECTORY": str(REPO), "MOLECULE_SCENARIO_DIRECTORY": str(scenario),
           "MOLECULE_EPHEMERAL_DIRECTORY": str(tmp_path), "SPECDEC_LAB_DIR": str(REPO / "lab")}
    paths = given_paths(scenario, tmp_path / "inventory", env)
    for name, value in paths:
        check(name, value, dict(paths))


def test_the_walk_finds_the_path_settings_it_should():
    # the lab's engine archive and wheelhouse, and the fleet scenario's tune loop files: a walk that found none
    # of them would pass for nothing
    lab = dict(given_paths(REPO / "inventories" / "lab", REPO / "inventories" / "lab", {}))
    assert {"inference_server_image_archive", "model_cache_wheelhouse"} <= set(lab)
    fleet = dict(given_paths(REPO / "molecule" / "fleet", REPO / "x", {"MOLECULE_EPHEMERAL_DIRECTORY": "/e"}))
    assert fleet["monitoring_tune_loop_ssh_key"] == "/e/id_tune_loop"
    assert fleet["monitoring_tune_loop_vault_password_file"].endswith("/vault-password")


if __name__ == "__main__":
    print(json.dumps(templated(Path(sys.argv[1]), Path(sys.argv[2]), json.loads(sys.argv[3]))))
