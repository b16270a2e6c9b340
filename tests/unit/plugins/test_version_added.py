"""Every version_added in the plugins' documentation is a release this collection has made or is making.

A plugin or option marked with a version beyond galaxy.yml's would be left out of that release's changelog
(antsibull-changelog lists new plugins by their version_added)."""

import glob
import os
import re

import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
DOC = re.compile(r"^DOCUMENTATION\s*=\s*r?(['\"]{3})(.*?)\1", re.S | re.M)


def _version(text):
    return tuple(int(x) for x in str(text).split("."))


def _found(node, path=""):
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "version_added":
                yield path or "(plugin)", value
            else:
                for found in _found(value, "%s.%s" % (path, key) if path else key):
                    yield found
    elif isinstance(node, list):
        for item in node:
            for found in _found(item, path):
                yield found


def documents():
    for path in sorted(glob.glob(os.path.join(REPO, "plugins", "*", "*.py"))):
        match = DOC.search(open(path).read())
        if match:
            yield path, yaml.safe_load(match.group(2))
    for path in sorted(glob.glob(os.path.join(REPO, "plugins", "filter", "*.yml"))):
        yield path, yaml.safe_load(open(path))


def test_no_version_added_beyond_the_collection_version():
    release = _version(yaml.safe_load(open(os.path.join(REPO, "galaxy.yml")))["version"])
    seen, beyond = 0, []
    for path, doc in documents():
        for where, value in _found(doc):
            seen += 1
            if _version(value) > release:
                beyond.append("%s: %s version_added %s" % (os.path.relpath(path, REPO), where, value))
    assert seen > 20, "the plugins' documentation was not found"
    assert not beyond, "beyond galaxy.yml's version %s:\n%s" % (".".join(map(str, release)), "\n".join(beyond))
