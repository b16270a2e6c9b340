"""The built collection and the documents a user reads.

- The tarball `ansible-galaxy collection build` makes holds no lab, benchmark, test, molecule or
  script file, and no results notebook.
- Every relative link in the shipped README.md and docs/*.md resolves inside the tarball.
- docs/PERFORMANCE.md stays a short page of figures (the history lives in bench/).
- docs/ARCHITECTURE.md names every plugin file and every filter.
- Each role's README.md names every option of its argument specs.
"""

import glob
import importlib
import os
import re
import subprocess
import sys
import tarfile

import pytest
import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
COLLECTIONS = os.path.join(REPO, "collections")
if COLLECTIONS not in sys.path:
    sys.path.insert(0, COLLECTIONS)

EXCLUDED_DIRS = ("lab", "bench", "tests", "molecule", "scripts")
# a measurement notebook or a harness's output: HISTORY.md, RESULTS.md, results.json, *.ipynb
NOTEBOOK = re.compile(r"(?i)(history\.md|results?([._-].*)?\.(md|json|csv|txt)|.*\.ipynb)")
PLUGIN_DIRS = ("filter", "modules", "action", "lookup", "callback", "module_utils", "plugin_utils")
# [text](target) and [text](target "title"); reference definitions: [label]: target
INLINE_LINK = re.compile(r"\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_LINK = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$", re.M)
FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The collection as `ansible-galaxy collection build` makes it, built once: the tarball's member
    names and the directory it was extracted to."""
    out = tmp_path_factory.mktemp("build")
    galaxy = os.path.join(os.path.dirname(sys.executable), "ansible-galaxy")
    proc = subprocess.run([galaxy, "collection", "build", "--output-path", str(out)], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    tarballs = glob.glob(os.path.join(str(out), "*.tar.gz"))
    assert len(tarballs) == 1, tarballs
    tree = out / "tree"
    with tarfile.open(tarballs[0]) as tar:
        names = [m.name[2:] if m.name.startswith("./") else m.name for m in tar.getmembers()]
        if sys.version_info >= (3, 12):
            tar.extractall(tree, filter="data")
        else:
            tar.extractall(tree)
    return names, str(tree)


def test_the_tarball_holds_no_lab_bench_test_molecule_or_script_file(built):
    names, _ = built
    shipped = [n for n in names if n.split("/")[0] in EXCLUDED_DIRS]
    assert shipped == []


def test_the_tarball_holds_no_results_notebook(built):
    names, _ = built
    notebooks = [n for n in names if NOTEBOOK.fullmatch(n.rstrip("/").split("/")[-1])]
    assert notebooks == []


def relative_links(text):
    """The relative link targets of a markdown text, anchors cut off; code blocks are not read."""
    text = FENCE.sub("", text)
    targets = INLINE_LINK.findall(text) + REFERENCE_LINK.findall(text)
    out = []
    for target in targets:
        if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target) or target.startswith(("#", "/")):
            continue  # a URL (https:, mailto:), an anchor of the same page, or an absolute path
        path = target.split("#", 1)[0]
        if path:
            out.append(path)
    return out


def shipped_documents(tree):
    docs = [os.path.join(tree, "README.md")] + sorted(glob.glob(os.path.join(tree, "docs", "*.md")))
    return [d for d in docs if os.path.isfile(d)]


def test_the_readme_and_the_docs_ship(built):
    _, tree = built
    found = [os.path.relpath(d, tree) for d in shipped_documents(tree)]
    assert "README.md" in found
    assert "docs/ARCHITECTURE.md" in found


def test_every_relative_link_of_the_shipped_documents_resolves_inside_the_tarball(built):
    _, tree = built
    broken = []
    for doc in shipped_documents(tree):
        with open(doc, encoding="utf-8") as handle:
            links = relative_links(handle.read())
        for link in links:
            target = os.path.normpath(os.path.join(os.path.dirname(doc), link))
            inside = os.path.commonpath([tree, target]) == tree
            if not (inside and os.path.exists(target)):
                broken.append("%s: %s" % (os.path.relpath(doc, tree), link))
    assert broken == []


def test_the_link_reader_finds_links_and_leaves_urls_anchors_and_code_alone():
    text = ("[a](docs/x.md) [b](y.md#part) [c](https://example.invalid/z.md) [d](#here)\n"
            "[e]: ../f.md\n```\n[g](not/read.md)\n```\n")
    assert relative_links(text) == ["docs/x.md", "y.md", "../f.md"]


def test_the_performance_page_is_short():
    with open(os.path.join(REPO, "docs", "PERFORMANCE.md"), encoding="utf-8") as handle:
        lines = handle.read().splitlines()
    assert len(lines) < 250


def architecture():
    with open(os.path.join(REPO, "docs", "ARCHITECTURE.md"), encoding="utf-8") as handle:
        return handle.read()


def plugin_files():
    out = []
    for directory in PLUGIN_DIRS:
        for path in sorted(glob.glob(os.path.join(REPO, "plugins", directory, "*.py"))):
            if os.path.basename(path) != "__init__.py":
                out.append("plugins/%s/%s" % (directory, os.path.basename(path)))
    return out


def filter_names():
    """Every filter name the filter files register, as ansible-core would find them."""
    out = []
    for path in sorted(glob.glob(os.path.join(REPO, "plugins", "filter", "*.py"))):
        name = os.path.splitext(os.path.basename(path))[0]
        if name == "__init__":
            continue
        module = importlib.import_module("ansible_collections.specdec.serve.plugins.filter." + name)
        out.extend((name, f) for f in sorted(module.FilterModule().filters()))
    return out


def test_there_are_plugins_and_filters_to_check():
    assert len(plugin_files()) > 30
    assert len(filter_names()) > 5  # the public API is at most MAX_FILTERS (test_public_api.py)


@pytest.mark.parametrize("path", plugin_files())
def test_the_architecture_names_every_plugin_file(path):
    assert path in architecture()


@pytest.mark.parametrize("source,name", filter_names(), ids=lambda v: v)
def test_the_architecture_names_every_filter(source, name):
    assert "`%s`" % name in architecture(), "filter %s of plugins/filter/%s.py" % (name, source)


def role_options():
    out = []
    for spec in sorted(glob.glob(os.path.join(REPO, "roles", "*", "meta", "argument_specs.yml"))):
        role = spec.split(os.sep)[-3]
        with open(spec, encoding="utf-8") as handle:
            entry_points = yaml.safe_load(handle)["argument_specs"]
        options = set()
        for entry in entry_points.values():
            options.update((entry or {}).get("options") or {})
        out.append((role, sorted(options)))
    return out


def test_every_role_has_options_to_check():
    roles = dict(role_options())
    assert len(roles) >= 10
    assert all(roles.values()), roles


@pytest.mark.parametrize("role,options", role_options(), ids=lambda v: v if isinstance(v, str) else "")
def test_each_role_readme_names_every_option_of_its_argument_specs(role, options):
    with open(os.path.join(REPO, "roles", role, "README.md"), encoding="utf-8") as handle:
        readme = handle.read()
    missing = [o for o in options if not re.search(r"(?<![A-Za-z0-9_])%s(?![A-Za-z0-9_])" % re.escape(o), readme)]
    assert missing == []
