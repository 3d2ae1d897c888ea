"""`pins update` against a real HTTP index on loopback (real wheels) and PyPI's real JSON API."""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest
from support.index_server import Index, build_wheel, serve

from blackwell_stack.data.pins import load_pins
from blackwell_stack.errors import HashMismatch, NetworkError, StackError
from blackwell_stack.hashes import hex_to_sri
from blackwell_stack.pins.update import update_pypi, update_torch

pytestmark = pytest.mark.proc  # the index's wheels are built by pip


def wheel_pin(pins, package: str) -> dict:
    """The pin of `package` for x86_64-linux and Python 3.12, as lib/pins.nix hands it to fetchurl."""
    entry = pins.packages[package]["wheels"]["x86_64-linux-312"]
    assert entry["verified"]
    return {"version": pins.packages[package]["version"], "name": entry["filename"], "url": entry["url"],
            "hash": entry["hash"]}

TRITON = "3.6.0+git1a2b3c4d"


@pytest.fixture(scope="module")
def wheels(tmp_path_factory):
    work = tmp_path_factory.mktemp("wheels")
    req = [f'triton=={TRITON} ; platform_system == "Linux"']
    return {
        "torch-0305": build_wheel(work, "torch", "2.12.0.dev20260305+cu130", requires=req),
        "torch-0307": build_wheel(work, "torch", "2.12.0.dev20260307+cu130", requires=req),
        "torch-0307-cu128": build_wheel(work, "torch", "2.12.0.dev20260307+cu128", requires=req),
        "torch-0310": build_wheel(work, "torch", "2.12.0.dev20260310+cu130", requires=req),
        "torch-0307-py311": build_wheel(work, "torch", "2.12.0.dev20260307+cu130", requires=req, python_tag="cp311"),
        "triton": build_wheel(work, "triton", TRITON),
    }


@pytest.fixture
def index(wheels, monkeypatch, tmp_path):
    monkeypatch.setenv("BLACKWELL_STACK_CACHE", str(tmp_path / "cache"))
    idx = Index(projects={
        "torch": [wheels[k] for k in ("torch-0305", "torch-0307", "torch-0307-cu128", "torch-0310", "torch-0307-py311")],
        "triton": [wheels["triton"]],
    })
    server = serve(idx)
    yield idx
    server.shutdown()


def sri(path):
    return hex_to_sri(hashlib.sha256(path.read_bytes()).hexdigest())


def seed_pins(repo, tmp_path):
    dest = tmp_path / "pins.json"
    shutil.copy(repo / "stacks/nightly/pins.json", dest)
    return dest


@pytest.mark.parametrize("style", ["html", "json"])
def test_update_torch_pins_the_dated_wheel_and_its_triton(index, wheels, repo, tmp_path, style):
    index.style = style
    pins_path = seed_pins(repo, tmp_path)
    update_torch(pins_path, date="20260307", cuda="cu130", pythons=["3.12"], systems=["x86_64-linux"], index_url=index.url)

    pins = load_pins(pins_path)
    torch = wheel_pin(pins, "torch")
    assert torch["version"] == "2.12.0.dev20260307+cu130"
    assert torch["name"] == wheels["torch-0307"].name
    assert torch["hash"] == sri(wheels["torch-0307"])
    assert "%2B" in torch["url"] and torch["url"].startswith("http://127.0.0.1:")
    triton = wheel_pin(pins, "triton")
    assert triton["version"] == TRITON
    assert triton["hash"] == sri(wheels["triton"])
    assert pins.update_command == "blackwell-stack pins update torch --date 20260307 --cuda cu130 --python 3.12"
    entry = pins.packages["torch"]["wheels"]["x86_64-linux-312"]
    assert entry["verified"] and "computed by `blackwell-stack pins update`" in entry["hash_source"]
    assert entry["hash_checked"] == "computed"


def test_published_hashes_are_checked_and_recorded(index, repo, tmp_path):
    index.publish_hashes = True
    pins_path = seed_pins(repo, tmp_path)
    update_torch(pins_path, date="20260307", pythons=["3.12"], systems=["x86_64-linux"], index_url=index.url)
    entry = load_pins(pins_path).packages["torch"]["wheels"]["x86_64-linux-312"]
    assert "equal to the sha256 the index publishes" in entry["hash_source"]


def test_hash_mismatch_writes_nothing(index, wheels, repo, tmp_path):
    index.publish_hashes = True
    index.wrong_hash_for = {wheels["torch-0307"].name}
    pins_path = seed_pins(repo, tmp_path)
    before = pins_path.read_bytes()
    with pytest.raises(HashMismatch, match="sha256 is"):
        update_torch(pins_path, date="20260307", pythons=["3.12"], systems=["x86_64-linux"], index_url=index.url)
    assert pins_path.read_bytes() == before
    cache = tmp_path / "cache" / "wheels"
    assert not any(p.name == wheels["torch-0307"].name for p in cache.glob("*")), "no half-downloaded or rejected wheel is kept"
    assert not list(cache.glob("*.part"))


def test_missing_date_names_the_nearest_dates(index, repo, tmp_path):
    pins_path = seed_pins(repo, tmp_path)
    before = pins_path.read_bytes()
    with pytest.raises(StackError) as err:
        update_torch(pins_path, date="20260308", pythons=["3.12"], systems=["x86_64-linux"], index_url=index.url)
    msg = str(err.value)
    assert "no torch nightly for 20260308 (cu130)" in msg
    assert "20260307, 20260310, 20260305" in msg
    assert pins_path.read_bytes() == before


def test_missing_python_is_reported(index, repo, tmp_path):
    pins_path = seed_pins(repo, tmp_path)
    with pytest.raises(StackError, match=r"no wheel for x86_64-linux and Python 3.13"):
        update_torch(pins_path, date="20260307", pythons=["3.13"], systems=["x86_64-linux"], index_url=index.url)


def test_bad_date_is_a_usage_error(repo, tmp_path):
    with pytest.raises(StackError, match="YYYYMMDD"):
        update_torch(seed_pins(repo, tmp_path), date="2026-03-07", pythons=["3.12"], systems=["x86_64-linux"], index_url="http://127.0.0.1:9/simple")


def test_unreachable_index_suggests_index_url(repo, tmp_path):
    import socket

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    with pytest.raises(NetworkError) as err:
        update_torch(seed_pins(repo, tmp_path), date="20260307", pythons=["3.12"], systems=["x86_64-linux"],
                     index_url=f"http://127.0.0.1:{port}/simple")
    assert "--index-url" in str(err.value)


@pytest.mark.network
def test_update_pypi_pins_a_real_release(tmp_path, monkeypatch):
    monkeypatch.setenv("BLACKWELL_STACK_CACHE", str(tmp_path / "cache"))
    from blackwell_stack import pypi

    pins_path = tmp_path / "pins.json"
    update_pypi(pins_path, ["six==1.16.0"], pythons=["3.12"], systems=["x86_64-linux"])
    data = json.loads(pins_path.read_text())
    entry = data["packages"]["six"]["wheels"]["any"]
    registry = pypi.pick(pypi.release_files("six", "1.16.0"), "*.whl")
    assert entry["hash"] == hex_to_sri(registry.sha256)
    assert entry["filename"] == "six-1.16.0-py2.py3-none-any.whl"
    assert data["update_command"].startswith("blackwell-stack pins update pypi six==1.16.0 --file")
    assert "PyPI's registry sha256" in entry["hash_source"] and entry["hash_checked"] == "registry"


@pytest.mark.network
def test_update_pypi_rejects_a_version_that_does_not_exist(tmp_path):
    with pytest.raises(NetworkError, match=r"six==0.0.0"):
        update_pypi(tmp_path / "pins.json", ["six==0.0.0"], pythons=["3.12"], systems=["x86_64-linux"])
    assert not (tmp_path / "pins.json").exists()
