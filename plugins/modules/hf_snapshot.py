#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to specdec.serve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: hf_snapshot
short_description: Download a Hugging Face model repo snapshot, once, with a completion manifest
version_added: "0.1.0"
description:
  - Downloads the files of a model repo at a revision (branch, tag or commit) with the real
    C(huggingface_hub) client, into a plain directory (O(dest)) or the Hugging Face cache layout
    (O(cache_dir)).
  - The revision is resolved to a commit id, which is returned and recorded. A branch or tag is
    followed again only with O(refresh=true); otherwise the commit cached first stays pinned.
  - A complete snapshot is recorded in C(.specdec-manifest.json) (repo, revision, commit, and for every
    file its size and the hub's identity - sha256 for LFS files, git blob id for the others), written
    atomically after the last file. A directory without a manifest is never considered complete.
  - Re-checking a cached snapshot compares file sizes with the manifest and touches no network.
    O(verify=sha256) hashes every file instead; files that fail are fetched again.
  - With O(dest), files are downloaded into C(<dest>.partial) (existing files hard-linked in first,
    so an update fetches only changed files), then the directory is renamed to O(dest). O(dest) never
    holds a partial download, and an engine reading it sees either the old or the new snapshot.
  - With O(cache_dir), the snapshot folder is filled with the commit id as revision, and
    C(refs/<revision>) is written only after the manifest, so a ref never points at a partial snapshot.
  - Interrupted transfers are resumed with HTTP range requests by the client; files completed by an
    interrupted run are kept in C(<dest>.partial) and not fetched again by the next run.
  - Fails before downloading when the filesystem lacks room, with C(needs X GB on PATH, Y GB free).
  - Progress of a running download is written every few seconds to C(.specdec-progress.json) in the
    directory being filled (bytes done and total, percent, rate).
  - Unlike the other modules of this collection this one needs C(huggingface_hub) on the target. Run it
    with the interpreter of the venv that the P(specdec.serve.model_cache#role) role creates, by setting
    C(ansible_python_interpreter) in the task's C(vars).
author: specdec.serve maintainers (@specdec-serve)
requirements:
  - huggingface_hub >= 0.34 (with hf_xet) on the target, except for O(offline=true) and O(state=absent)
options:
  repo_id:
    description: Model repo, C(org/name).
    type: str
    required: true
  revision:
    description: Branch, tag or full commit id.
    type: str
    default: main
  dest:
    description:
      - Directory that receives the files of the repo (C(<dest>/config.json), ...). Its parent must be on
        the same filesystem as C(<dest>.partial), its sibling.
      - Mutually exclusive with O(cache_dir).
    type: path
  cache_dir:
    description:
      - Root of a Hugging Face cache (the layout of C(HF_HUB_CACHE)); the snapshot lands in
        C(<cache_dir>/models--<org>--<name>/snapshots/<commit>).
      - Mutually exclusive with O(dest).
    type: path
  allow_patterns:
    description: Only files matching one of these glob patterns are downloaded.
    type: list
    elements: str
  ignore_patterns:
    description: Files matching one of these glob patterns are not downloaded.
    type: list
    elements: str
  token:
    description:
      - Hugging Face token for private or gated repos. Never logged. Defaults to the C(HF_TOKEN)
        environment variable of the module's process.
      - It reaches the client in-process; it is never put on a command line or written to a file.
      - Prefer O(token_file) for an C(async) task, whose arguments stay on the host's disk while it runs.
    type: str
  token_file:
    description:
      - A file holding the token (read once, surrounding whitespace removed), instead of O(token). The
        C(model_cache) role writes it C(0600) under C(/run) and removes it when its downloads end.
    type: path
    version_added: "0.1.0"
  endpoint:
    description:
      - Hub endpoint, for a mirror or a peer. Defaults to C(HF_ENDPOINT), then C(https://huggingface.co).
    type: str
  verify:
    description:
      - V(size) compares file sizes with the manifest (no network, no reading of file contents).
      - V(sha256) hashes every file and compares it with the hub's identity recorded in the manifest.
    type: str
    choices: [size, sha256]
    default: size
  refresh:
    description: Ask the hub whether O(revision) moved, and download the new commit if it did.
    type: bool
    default: false
  offline:
    description:
      - Never contact the hub. A complete snapshot is reported as it is; an incomplete one fails (or,
        in check mode, is reported as V(changed) with RV(cached=false)).
    type: bool
    default: false
  max_workers:
    description: Files downloaded in parallel.
    type: int
    default: 8
  reserve_gb:
    description: Free space, in GB, that must remain on the filesystem after the download.
    type: float
    default: 0
  lock:
    description:
      - The lock of O(repo_id) at O(revision) (a 40-hex commit), as the first fetch of that commit recorded it
        (RV(lock)) - C(repo_id), C(revision) and C(files), each file's C(size) and C(sha256) (the hub's LFS oid
        for LFS files, the sha256 of the bytes for the others).
      - When given, it is the reference of every check instead of the listing of whoever serves the bytes -
        the listing of the hub, mirror or peer (file set, sizes, LFS sha256) before anything is downloaded,
        the bytes of the small non-LFS files after, and a cached snapshot's manifest and small files on
        every re-check (every file with O(verify=sha256)). A disagreement fails, naming the file and
        O(lock_path); nothing is put in place.
      - Files of the lock that O(allow_patterns) and O(ignore_patterns) do not select are not asked for.
    type: dict
    version_added: "0.1.0"
  ca_file:
    description:
      - PEM CA certificate(s) that an C(https://) O(endpoint) is verified against, instead of the system's
        (the C(model_cache) role's peer copies over TLS). Verification is never turned off.
    type: path
    version_added: "0.1.0"
  lock_path:
    description: Where the lock is kept (on the controller); only named in messages, and returned with RV(lock).
    type: str
    version_added: "0.1.0"
  record_lock:
    description:
      - Return RV(lock), the lock of the complete snapshot - the listing's sha256 of LFS files (checked against
        their bytes when downloaded), the sha256 of the bytes of the others (read now, checked against their
        git blob id).
    type: bool
    default: false
    version_added: "0.1.0"
  state:
    description: V(absent) removes the snapshot directory (and a leftover C(<dest>.partial)).
    type: str
    choices: [present, absent]
    default: present
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Resolves the revision and lists the files (metadata only) unless O(offline=true); downloads nothing.
  diff_mode:
    support: full
    details: Shows the commit and the files with their sizes, before and after.
  platform:
    platforms: posix
notes:
  - The return value RV(network) tells whether the hub was contacted.
seealso:
  - name: huggingface_hub download guide
    description: snapshot_download, allow and ignore patterns, local_dir.
    link: https://huggingface.co/docs/huggingface_hub/guides/download
"""

EXAMPLES = r"""
- name: Cache gpt-oss-120b without the Metal weights
  specdec.serve.hf_snapshot:
    repo_id: openai/gpt-oss-120b
    revision: main
    dest: /var/lib/specdec/models/openai/gpt-oss-120b
    ignore_patterns: ["metal/*", "original/*"]
    token: "{{ model_cache_hf_token }}"
  vars:
    ansible_python_interpreter: /opt/specdec/hf-venv/bin/python

- name: Pin a draft model at a tag, from an internal mirror, checking every byte
  specdec.serve.hf_snapshot:
    repo_id: nvidia/gpt-oss-120b-Eagle3-long-context
    revision: v1.0
    dest: /var/lib/specdec/models/nvidia/gpt-oss-120b-Eagle3-long-context
    endpoint: http://hf-mirror.internal:8080
    verify: sha256
  vars:
    ansible_python_interpreter: /opt/specdec/hf-venv/bin/python

- name: Fill a Hugging Face cache for engines that read HF_HOME
  specdec.serve.hf_snapshot:
    repo_id: nvidia/Llama-3.1-8B-Instruct-FP4
    cache_dir: /var/lib/specdec/hf-cache/hub
  vars:
    ansible_python_interpreter: /opt/specdec/hf-venv/bin/python
"""

RETURN = r"""
repo_id:
  description: The repo.
  returned: always
  type: str
  sample: openai/gpt-oss-120b
revision:
  description: The revision asked for.
  returned: always
  type: str
  sample: main
commit:
  description: Commit id of the snapshot (resolved from O(revision), or pinned in the manifest).
  returned: when known
  type: str
  sample: 8b193b0ef83bd41b40eb71fee8f1432315e02a3e
path:
  description: Directory holding the snapshot's files.
  returned: state=present
  type: str
  sample: /var/lib/specdec/models/openai/gpt-oss-120b
manifest:
  description: Path of the completion manifest.
  returned: when complete
  type: str
  sample: /var/lib/specdec/models/openai/gpt-oss-120b/.specdec-manifest.json
cached:
  description: Whether a complete snapshot is (check mode - was) in place at the end.
  returned: state=present
  type: bool
files:
  description: Number of files in the snapshot.
  returned: when complete
  type: int
  sample: 9
size:
  description: Bytes of the snapshot's files.
  returned: when complete
  type: int
  sample: 65248163840
downloaded_bytes:
  description: Bytes of the files fetched (check mode - to fetch); 0 when nothing was needed.
  returned: state=present
  type: int
fetched_files:
  description: Paths of the files fetched (check mode - to fetch).
  returned: state=present
  type: list
  elements: str
repaired:
  description: Paths of cached files that failed the check and were fetched again.
  returned: state=present
  type: list
  elements: str
network:
  description: Whether the hub was contacted.
  returned: always
  type: bool
completed_at:
  description: UTC time the snapshot was completed.
  returned: when complete
  type: str
lock:
  description: The lock of the complete snapshot (see O(lock)), for the caller to keep.
  returned: with O(record_lock=true), when complete
  type: dict
  sample: {"format": 1, "repo_id": "org/name", "revision": "8b193b0ef83bd41b40eb71fee8f1432315e02a3e",
           "files": {"config.json": {"size": 1234, "sha256": "3f1a..."}}}
lock_path:
  description: O(lock_path), beside RV(lock).
  returned: with O(record_lock=true), when complete
  type: str
removed:
  description: Directories removed.
  returned: state=absent
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule, env_fallback

from ansible_collections.specdec.serve.plugins.module_utils.hf_download import Snapshot, SnapshotError


def main():
    module = AnsibleModule(
        argument_spec=dict(
            repo_id=dict(type="str", required=True),
            revision=dict(type="str", default="main"),
            dest=dict(type="path"),
            cache_dir=dict(type="path"),
            allow_patterns=dict(type="list", elements="str"),
            ignore_patterns=dict(type="list", elements="str"),
            token=dict(type="str", no_log=True, fallback=(env_fallback, ["HF_TOKEN"])),
            token_file=dict(type="path"),
            endpoint=dict(type="str", fallback=(env_fallback, ["HF_ENDPOINT"])),
            verify=dict(type="str", choices=["size", "sha256"], default="size"),
            refresh=dict(type="bool", default=False),
            offline=dict(type="bool", default=False),
            max_workers=dict(type="int", default=8),
            reserve_gb=dict(type="float", default=0),
            state=dict(type="str", choices=["present", "absent"], default="present"),
            lock=dict(type="dict"),
            lock_path=dict(type="str"),
            ca_file=dict(type="path"),
            record_lock=dict(type="bool", default=False),
        ),
        mutually_exclusive=[["dest", "cache_dir"], ["token", "token_file"]],
        required_one_of=[["dest", "cache_dir"]],
        supports_check_mode=True,
    )
    params = module.params
    if params["token_file"]:
        try:
            with open(params["token_file"]) as handle:
                params["token"] = handle.read().strip() or None
        except (IOError, OSError) as exc:
            module.fail_json(msg="cannot read token_file %s: %s" % (params["token_file"], exc.strerror))
        if params["token"]:
            module.no_log_values.add(params["token"])
    try:
        snapshot = Snapshot(
            params["repo_id"], revision=params["revision"], dest=params["dest"], cache_dir=params["cache_dir"],
            allow_patterns=params["allow_patterns"], ignore_patterns=params["ignore_patterns"],
            token=params["token"], endpoint=params["endpoint"], verify=params["verify"],
            refresh=params["refresh"], offline=params["offline"], max_workers=params["max_workers"],
            reserve_gb=params["reserve_gb"], lock=params["lock"], lock_path=params["lock_path"],
            record_lock=params["record_lock"], ca_file=params["ca_file"])
        result = snapshot.run(check_mode=module.check_mode, state=params["state"])
    except SnapshotError as exc:
        module.fail_json(msg=str(exc), repo_id=params["repo_id"], revision=params["revision"])
    if not module._diff:
        result.pop("diff", None)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
