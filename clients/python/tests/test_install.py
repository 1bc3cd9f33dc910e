# SPDX-License-Identifier: MIT
# The package installs offline the way the README says: a venv with --system-site-packages (so
# Debian's httpx and websockets are used) and a plain `pip install ./clients/python` (--no-index
# here, so that any reach for the network fails; the build backend is in the tree and needs
# nothing installed, with build isolation or without). What is installed is typed: a user's code
# type-checks with mypy --strict against it.
from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

HERE = Path(__file__).resolve().parent

USAGE = """
from strata_client import Strata, StrataChatMessageHistory, StrataError, Counter

def bump(db: Strata) -> int:
    c: Counter = db.incr("likes")
    try:
        db.book("gig", {"section": "A", "seats": ["1-1"]})
    except StrataError as e:
        print(e.status, e.code, e.body.get("seats"))
    h = StrataChatMessageHistory(db, "alice", "trip")
    return c["value"] + len(h.messages)
"""


def test_pip_install_offline_in_a_venv(tmp_path: Path) -> None:
    src = tmp_path / "src"
    shutil.copytree(HERE.parent, src, ignore=shutil.ignore_patterns(
        "tests", "build", "*.egg-info", "__pycache__"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                   check=True)
    py = str(venv / "bin" / "python")
    r = subprocess.run([py, "-m", "pip", "install", "-q", "--no-cache-dir", "--no-index", str(src)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    # and the same without build isolation (what the README said before), and an editable one
    for how in (["--no-build-isolation"], ["-e"]):
        r = subprocess.run([py, "-m", "pip", "install", "-q", "--no-cache-dir", "--no-index",
                            "--force-reinstall", "--no-deps", *how, str(src)],
                           capture_output=True, text=True)
        assert r.returncode == 0, how + [r.stdout, r.stderr]
    r = subprocess.run([py, "-m", "pip", "install", "-q", "--no-cache-dir", "--no-index",
                        "--force-reinstall", "--no-deps", str(src)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    work = tmp_path / "app"
    work.mkdir()
    (work / "app.py").write_text(textwrap.dedent(USAGE))
    r = subprocess.run([py, "-c", "import strata_client, pathlib; "
                        "p = pathlib.Path(strata_client.__file__).parent; "
                        "print(p, (p / 'py.typed').exists())"],
                       cwd=work, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    where, typed = r.stdout.split()
    assert str(venv) in where and typed == "True", r.stdout
    r = subprocess.run([py, "-m", "mypy", "--strict", "--no-incremental", "app.py"], cwd=work,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
