"""`serve pin-model`: a profile's checkpoint pinned from the Hugging Face API, in a manifest beside the profile.

On a host that reaches the Hub (`--endpoint`, else $HF_ENDPOINT, else https://huggingface.co; $HF_TOKEN for a gated
repository) it reads, as huggingface_hub's HfApi does:

- `GET /api/models/{repo}/revision/{revision}`: the commit (`sha`) a branch,
  tag or commit names (HfApi.model_info);
- `GET /api/models/{repo}/tree/{commit}?recursive=true`: every file at that
  commit, page after page (its `Link: <...>; rel="next"` header), with its
  size, its git blob id (`oid`) and, for a file kept in LFS, the sha256 of its
  content (`lfs.oid`) (HfApi.list_repo_tree).

and writes the manifest (modules/models/<profile>.json): the model, the commit, and each file with its sha256 (LFS)
or its git blob id (small files stored in git), so that a checkpoint on disk can be checked file by file. The
revision itself goes into the profile's `model.revision` (or `services.sglang.model.revision`): the command prints
the line.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import urllib.parse
from pathlib import Path
from typing import Any

from blackwell_stack.download import read_url
from blackwell_stack.errors import NetworkError, StackError

DEFAULT_ENDPOINT = "https://huggingface.co"
MANIFEST_VERSION = 1
# An API answer is a few MiB at most (a tree page lists up to a thousand files); a page count past this is a loop.
ANSWER_LIMIT = 16 << 20
MAX_PAGES = 1000
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_NEXT = re.compile(r'<([^>]+)>\s*;\s*rel="?next"?')


def endpoint(given: str | None) -> str:
    return (given or os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def manifest_path(profile_file: Path) -> Path:
    """Beside the profiles: modules/profiles/NAME.json -> modules/models/NAME.json (not in profiles/, where every
    JSON file is read as a profile); beside a profile elsewhere, NAME.model.json."""
    if profile_file.parent.name == "profiles":
        return profile_file.parent.parent / "models" / profile_file.name
    return profile_file.with_name(profile_file.stem + ".model.json")


def _get(url: str, what: str) -> tuple[Any, str | None]:
    """(the JSON answer, the next page's URL or None: the answer's Link header, the tree's pagination)."""
    token = os.environ.get("HF_TOKEN")
    headers = {"Accept": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})}
    try:
        body, answer = read_url(url, limit=ANSWER_LIMIT, what=what, headers=headers)
    except NetworkError as exc:
        hint = ("check the repository id and the revision (a branch, a tag or a 40-hex commit); a gated or private "
                "repository needs HF_TOKEN" if " 401 " in exc.message or " 403 " in exc.message
                or " 404 " in exc.message else "run it on a host that reaches the Hub, or pass --endpoint")
        raise NetworkError(exc.message, hint) from None
    try:
        data = json.loads(body)
    except ValueError:
        raise NetworkError(f"{url}: {what} is not JSON", _NOT_THE_API) from None
    match = _NEXT.search(answer.get("Link") or "")
    return data, urllib.parse.urljoin(url, match.group(1)) if match else None


_NOT_THE_API = "check --endpoint (or HF_ENDPOINT): it does not answer as the Hugging Face API does"


def resolve(base: str, repo: str, revision: str) -> str:
    """The 40-hex commit `revision` names in `repo`."""
    url = f"{base}/api/models/{repo}/revision/{urllib.parse.quote(revision, safe='')}"
    data, _ = _get(url, "the model's revision")
    sha = data.get("sha") if isinstance(data, dict) else None
    if not isinstance(sha, str) or not _COMMIT.match(sha):
        raise NetworkError(f"{url}: the answer names no 40-hex commit (`sha`)", _NOT_THE_API)
    return sha


def files_at(base: str, repo: str, commit: str) -> dict[str, dict[str, Any]]:
    """path -> {"size", and "sha256" (LFS) or "git_blob"} for every file of the repository at `commit`."""
    url: str | None = f"{base}/api/models/{repo}/tree/{commit}?recursive=true"
    files: dict[str, dict[str, Any]] = {}
    for _page in range(MAX_PAGES):
        if url is None:
            return dict(sorted(files.items()))
        data, url = _get(url, "the model's file tree")
        if not isinstance(data, list):
            raise NetworkError(f"the file tree of {repo} at {commit} is not a list", _NOT_THE_API)
        files.update(_file(entry, repo) for entry in data if isinstance(entry, dict) and entry.get("type") == "file")
    raise NetworkError(f"the file tree of {repo} runs past {MAX_PAGES} pages", _NOT_THE_API)


def _file(entry: dict[str, Any], repo: str) -> tuple[str, dict[str, Any]]:
    path, size, oid, lfs = entry.get("path"), entry.get("size"), entry.get("oid"), entry.get("lfs")
    if not isinstance(path, str) or not path or not isinstance(size, int) or not isinstance(oid, str):
        raise NetworkError(f"a file of {repo}'s tree lacks its path, size or oid: {json.dumps(entry)[:200]}",
                           _NOT_THE_API)
    if lfs is None:
        return path, {"size": size, "git_blob": oid}
    sha256 = lfs.get("oid") if isinstance(lfs, dict) else None
    if not isinstance(sha256, str) or not _SHA256.match(sha256):
        raise NetworkError(f"{repo}: {path} is in LFS without the sha256 of its content (lfs.oid)", _NOT_THE_API)
    return path, {"size": lfs.get("size", size), "sha256": sha256}


def pin(repo: str, revision: str, *, base: str) -> dict[str, Any]:
    """The manifest of `repo` at `revision` (its commit, and every file with its hash)."""
    commit = resolve(base, repo, revision)
    files = files_at(base, repo, commit)
    if not files:
        raise StackError(f"{repo} has no files at {commit}", "check the repository id")
    return {
        "schema_version": MANIFEST_VERSION,
        "model": repo,
        "revision": commit,
        "asked": revision,
        "source": f"{base}/api/models/{repo}/revision/{revision} and /tree/{commit} (recursive), read on "
                  f"{dt.date.today().isoformat()}: each LFS file's sha256 is its lfs.oid, each other file's "
                  "git_blob its git blob id",
        "files": files,
    }
