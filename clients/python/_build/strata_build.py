# SPDX-License-Identifier: MIT
"""The package's build backend (PEP 517, PEP 660), in the tree and on the standard library only.

With setuptools as the backend, `pip install ./clients/python` first installs setuptools into an
isolated build environment, from the network: offline it fails unless the caller knows to add
--no-build-isolation. This backend needs nothing (``requires = []``), so the plain command works
offline in any venv, isolated or not. It reads name, version and dependencies from pyproject.toml
(tomllib, Python 3.11+) and packs strata_client/ (with py.typed) into a wheel.
"""
from __future__ import annotations

import base64
import hashlib
import io
import os
import tarfile
import tomllib
import zipfile
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "strata_client"
TAG = "py3-none-any"


def _project() -> Dict[str, Any]:
    with open(ROOT / "pyproject.toml", "rb") as f:
        return dict(tomllib.load(f)["project"])


def _dist(p: Dict[str, Any]) -> str:
    return f"{p['name'].replace('-', '_')}-{p['version']}"


def _metadata(p: Dict[str, Any]) -> str:
    lines = ["Metadata-Version: 2.1", f"Name: {p['name']}", f"Version: {p['version']}",
             f"Summary: {p.get('description', '')}",
             f"License: {p.get('license', {}).get('text', '')}",
             f"Requires-Python: {p.get('requires-python', '')}"]
    lines += [f"Classifier: {c}" for c in p.get("classifiers", [])]
    lines += [f"Requires-Dist: {d}" for d in p.get("dependencies", [])]
    readme = ROOT / str(p.get("readme", "README.md"))
    lines.append("Description-Content-Type: text/markdown")
    body = readme.read_text() if readme.exists() else ""
    return "\n".join(lines) + "\n\n" + body


def _wheel_meta() -> str:
    return f"Wheel-Version: 1.0\nGenerator: strata_build\nRoot-Is-Purelib: true\nTag: {TAG}\n"


def _files() -> List[Tuple[str, bytes]]:
    out = []
    for f in sorted((ROOT / PACKAGE).iterdir()):
        if f.is_file() and (f.suffix == ".py" or f.name == "py.typed"):
            out.append((f"{PACKAGE}/{f.name}", f.read_bytes()))
    return out


def _write_wheel(directory: str, files: List[Tuple[str, bytes]]) -> str:
    p = _project()
    dist = _dist(p)
    name = f"{dist}-{TAG}.whl"
    info = f"{dist}.dist-info"
    files = files + [(f"{info}/METADATA", _metadata(p).encode()),
                     (f"{info}/WHEEL", _wheel_meta().encode())]
    record = []
    with zipfile.ZipFile(os.path.join(directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in files:
            z.writestr(zipfile.ZipInfo(path, (2020, 1, 1, 0, 0, 0)), data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            record.append(f"{path},sha256={digest.decode()},{len(data)}")
        record.append(f"{info}/RECORD,,")
        z.writestr(zipfile.ZipInfo(f"{info}/RECORD", (2020, 1, 1, 0, 0, 0)),
                   "\n".join(record) + "\n")
    return name


# ---- PEP 517 ----
def get_requires_for_build_wheel(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
    return []


def get_requires_for_build_sdist(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
    return []


def build_wheel(wheel_directory: str, config_settings: Optional[Dict[str, Any]] = None,
                metadata_directory: Optional[str] = None) -> str:
    return _write_wheel(wheel_directory, _files())


def build_sdist(sdist_directory: str,
                config_settings: Optional[Dict[str, Any]] = None) -> str:
    dist = _dist(_project())
    name = f"{dist}.tar.gz"
    members = ["pyproject.toml", "README.md", "_build/strata_build.py"]
    members += [p for p, _ in _files()]
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as t:
        for m in members:
            data = (ROOT / m).read_bytes()
            ti = tarfile.TarInfo(f"{dist}/{m}")
            ti.size, ti.mtime = len(data), 1577836800
            t.addfile(ti, io.BytesIO(data))
    return name


# ---- PEP 660: `pip install -e`, a .pth file naming this directory ----
def get_requires_for_build_editable(config_settings: Optional[Dict[str, Any]] = None
                                    ) -> List[str]:
    return []


def build_editable(wheel_directory: str, config_settings: Optional[Dict[str, Any]] = None,
                   metadata_directory: Optional[str] = None) -> str:
    return _write_wheel(wheel_directory, [(f"{PACKAGE}.pth", f"{ROOT}\n".encode())])
