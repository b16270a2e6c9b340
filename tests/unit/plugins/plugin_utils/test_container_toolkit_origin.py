"""The container_toolkit role's judge of a host's report (its ``origin`` entry, plugin_utils/_roles/container_toolkit.py):
why the toolkit there comes from elsewhere, so that the role leaves its repositories and packages alone, and whether
the role manages them."""

import pytest

from ansible_collections.specdec.serve.plugins.plugin_utils._checks import PlanRefusal
from ansible_collections.specdec.serve.plugins.plugin_utils._roles import container_toolkit
from ansible_collections.specdec.serve.plugins.plugin_utils._roles.container_toolkit import why_elsewhere

OWN = "/etc/apt/sources.list.d/nvidia-container-toolkit.sources"
GUIDE = "/etc/apt/sources.list.d/nvidia-container-toolkit.list"
INSTALLED = "install ok installed|1.17.8-1"


@pytest.mark.parametrize("found, dpkg, own, why", [
    # a bare host, and one the role already manages (its source, whether or not the find matched it)
    ([], "", False, ""),
    ([OWN], INSTALLED, True, ""),
    ([], INSTALLED, True, ""),
    # the install guide's one-line file, written before the toolkit is installed, is adopted: the role writes
    # its own source and removes it
    ([GUIDE], "", False, ""),
    ([GUIDE], "deinstall ok config-files|1.17.8-1", False, ""),
    # the toolkit installed through the guide's file (a DGX Spark as it ships): left alone, source, keyring,
    # version and all
    ([GUIDE], INSTALLED, False,
     "nvidia-container-toolkit 1.17.8-1 installed from the apt source of NVIDIA's install guide, " + GUIDE),
    # ... unless the role already manages it (its own source is there)
    ([GUIDE, OWN], INSTALLED, True, ""),
    # DGX Spark's or a hand-made source under another name: left alone, named
    (["/etc/apt/sources.list.d/dgx.list", OWN], INSTALLED, True, "NVIDIA apt source in /etc/apt/sources.list.d/dgx.list"),
    # installed with no source at all (a local .deb, a removed source)
    ([], INSTALLED, False, "nvidia-container-toolkit 1.17.8-1 installed from another source"),
    # removed but not purged: not installed
    ([], "deinstall ok config-files|1.17.8-1", False, ""),
])
def test_toolkit_origin_says_why_the_toolkit_comes_from_elsewhere(found, dpkg, own, why):
    assert why_elsewhere(found, dpkg_status=dpkg, own_source=own, own_paths=[OWN, GUIDE]) == why


def test_toolkit_origin_dgx_os_comes_first():
    assert why_elsewhere([OWN], dgx_release=True, dpkg_status=INSTALLED, own_source=True,
                          own_paths=[OWN, GUIDE]) == "DGX OS, /etc/dgx-release"


def test_the_origin_entry_judges_the_hosts_report_and_decides_whether_to_manage():
    def judge(manage, **reported):
        ctx = {"reported": dict({"sources": [], "dgx_release": False, "dpkg_status": "", "own_source": False},
                                **reported),
               "vars": {"_container_toolkit_source_file": OWN, "_container_toolkit_guide_list": GUIDE}}
        return container_toolkit.PLANNERS["origin"]({"manage_packages": manage}, None, ctx)

    assert judge("auto") == {"why": "", "manage": True}
    # what Ansible's templating hands over as text is read as the boolean it says
    assert judge("auto", dgx_release="False", own_source="True") == {"why": "", "manage": True}
    assert judge("auto", dgx_release="True") == {"why": "DGX OS, /etc/dgx-release", "manage": False}
    assert judge("always", dgx_release=True) == {"why": "DGX OS, /etc/dgx-release", "manage": True}
    assert judge("never") == {"why": "", "manage": False}


@pytest.mark.parametrize("reported", [{"sources": None}, {"sources": "x.list"}, {"sources": [1]},
                                      {"sources": [], "dpkg_status": 3}])
def test_a_report_of_another_shape_is_refused(reported):
    with pytest.raises(PlanRefusal, match="reported"):
        container_toolkit.PLANNERS["origin"]({"manage_packages": "auto"}, None, {"reported": reported})
