"""PyPI's JSON API as this project reads it: canonical file URLs, registry digests."""

import pytest

from blackwell_stack import pypi
from blackwell_stack.hashes import sha256_file


def test_mirror_relative_urls_map_to_pypi_file_host():
    doc = "https://pypi.org/pypi/sglang/json"
    rel = "../../packages/packages/97/b4/abc/sglang-0.5.9-py3-none-any.whl"
    assert pypi.file_url(doc, rel) == "https://files.pythonhosted.org/packages/97/b4/abc/sglang-0.5.9-py3-none-any.whl"
    absolute = "https://files.pythonhosted.org/packages/97/b4/abc/x.whl"
    assert pypi.file_url(doc, absolute) == absolute


@pytest.mark.network
def test_real_release_files_download_and_match_the_registry_digest(pypi_file):
    files = pypi.release_files("sglang", "0.5.9")
    wheel = pypi.pick(files, "*.whl")
    assert wheel.url.startswith(pypi.FILES_HOST)
    assert sha256_file(pypi_file("sglang", "0.5.9")) == wheel.sha256
