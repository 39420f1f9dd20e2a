"""The published package: the sdist and the wheel as PyPI and pip see them."""

from __future__ import annotations

import email
import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The sdist and the wheel, built from this checkout (with the installed backend)."""
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return {"wheel": next(out.glob("*.whl")), "sdist": next(out.glob("*.tar.gz"))}


def test_the_wheel_holds_py_typed_the_licence_and_the_pytest_plugin(dist):
    with zipfile.ZipFile(dist["wheel"]) as wheel:
        names = set(wheel.namelist())
        info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
        entry_points = wheel.read(f"{info}/entry_points.txt").decode()
        metadata = email.message_from_bytes(wheel.read(f"{info}/METADATA"))
    assert "ipydevice/py.typed" in names
    assert f"{info}/licenses/LICENSE" in names
    assert "[pytest11]\nipydevice = ipydevice.integrations.pytest_plugin" in entry_points
    assert metadata["License-Expression"] == "BSD-3-Clause"
    classifiers = metadata.get_all("Classifier")
    for version in ("3.10", "3.11", "3.12", "3.13"):
        assert f"Programming Language :: Python :: {version}" in classifiers
    assert {"Framework :: Pytest", "Typing :: Typed"} <= set(classifiers)
    urls = dict(u.split(", ", 1) for u in metadata.get_all("Project-URL"))
    assert set(urls) >= {"Homepage", "Documentation", "Issues", "Changelog"}
    assert all(u.startswith("https://github.com/ipydevice/ipydevice") for u in urls.values())
    # Test-tool pins stay out of the published extras (they are the `dev` group).
    requires = metadata.get_all("Requires-Dist")
    assert not [r for r in requires if re.match(r"(ruff|mypy|twine|build)\b", r)], requires


def test_the_sdist_holds_the_licence_and_the_test_data(dist):
    with tarfile.open(dist["sdist"]) as sdist:
        names = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    assert {"LICENSE", "ipydevice/py.typed", "tests/data/device_messages.json"} <= names


def test_twine_check_passes(dist):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "twine",
            "check",
            "--strict",
            str(dist["wheel"]),
            str(dist["sdist"]),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_readme_works_on_pypi():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    images = re.findall(r"!\[[^\]]*\]\(([^)\s]+)", readme) + re.findall(
        r'<img[^>]+src="([^"]+)"', readme
    )
    assert images
    for image in images:
        assert image.startswith("https://raw.githubusercontent.com/ipydevice/ipydevice/main/"), (
            image
        )
        assert (ROOT / image.split("/main/", 1)[1]).is_file(), image
    assert "--index-url https://download.pytorch.org/whl/cpu" in readme  # no CUDA download


def test_the_licence_is_bsd_3_clause():
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("BSD 3-Clause License")
    assert "Copyright (c) 2026, The ipydevice developers" in text
