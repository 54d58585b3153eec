"""The package a user installs: built by PyPA `build` (sdist, then the wheel from that sdist),
its contents checked, then installed into a fresh venv and run."""

from __future__ import annotations

import subprocess
import sys
import tarfile
import tomllib
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN = ("tests/", ".venv/", "tools/", "bench/", "__pycache__", ".pyc", "node_modules")


def _modules() -> set[str]:
    """Every file of the package in the source tree (what must ship), relative to ROOT."""
    return {
        str(p.relative_to(ROOT))
        for p in (ROOT / "loopx_chat").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix in (".py", ".typed", ".json")
    }


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, str]]:
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (sdist,) = out.glob("*.tar.gz")
    (wheel,) = out.glob("*.whl")
    yield sdist, wheel, done.stdout + done.stderr


def test_the_build_warns_about_nothing_deprecated(built: tuple[Path, Path, str]) -> None:
    log = built[2]
    assert "deprecat" not in log.lower(), [line for line in log.splitlines() if "eprecat" in line]


def test_the_wheel_holds_the_package_and_the_license_only(built: tuple[Path, Path, str]) -> None:
    with zipfile.ZipFile(built[1]) as wheel:
        names = set(wheel.namelist())
        info = next(n for n in names if n.endswith(".dist-info/METADATA"))
        metadata = wheel.read(info).decode()
        dist_info = info.rsplit("/", 1)[0]
        license_text = wheel.read(f"{dist_info}/licenses/LICENSE")
        entry_points = wheel.read(f"{dist_info}/entry_points.txt").decode()
    assert _modules() <= names, sorted(_modules() - names)
    assert "loopx_chat/py.typed" in names
    # The public contract's JSON Schema ships as package data (tests/projection/test_contract.py).
    assert "loopx_chat/session_runtime/session_runtime_readonly_projection_v0.schema.json" in names
    assert license_text == (ROOT / "LICENSE").read_bytes()
    assert "License-Expression: MIT" in metadata.splitlines()
    assert "loopx-chat = loopx_chat.cli:run" in entry_points
    outside = {n for n in names if not n.startswith(("loopx_chat/", dist_info + "/"))}
    assert outside == set(), outside
    assert not [n for n in names if any(bad in n for bad in FORBIDDEN)]


def test_the_sdist_has_no_tests_and_everything_the_wheel_needs(
    built: tuple[Path, Path, str],
) -> None:
    with tarfile.open(built[0]) as sdist:
        names = {n.split("/", 1)[1] for n in sdist.getnames() if "/" in n}
    assert _modules() <= names, sorted(_modules() - names)
    assert {"LICENSE", "README.md", "pyproject.toml"} <= names
    assert not [n for n in names if any(bad in n for bad in FORBIDDEN)]


def test_the_license_matches_the_metadata() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "MIT"
    assert project["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License\n") and "WITHOUT WARRANTY OF ANY KIND" in text


def test_the_wheel_installs_and_runs_in_a_fresh_venv(
    built: tuple[Path, Path, str], tmp_path: Path
) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    pip = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", str(built[1])],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert pip.returncode == 0, pip.stderr[-3000:]
    version = subprocess.run(
        [str(venv / "bin" / "loopx-chat"), "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tmp_path,  # never the checkout: it must run from the installed copy
    )
    expected = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert version.returncode == 0 and version.stdout.strip().endswith(expected), version
    # The installed copy finds the public contract's schema where the tests read it.
    schema = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import json; from importlib import resources; "
            "from loopx_chat.session_runtime.contract import CONTRACT_SCHEMA_FILE as F; "
            "print(json.loads(resources.files('loopx_chat.session_runtime')"
            ".joinpath(F).read_text())['$id'])",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tmp_path,
    )
    assert schema.stdout.strip() == "urn:loopx-chat:session_runtime_readonly_projection_v0", schema
