# SPDX-License-Identifier: MIT
# Helpers for the Python client's tests: the real strata binary (STRATA_BIN) on loopback ports,
# temp data dirs, HS256 tokens, and a clean stop checked on teardown (exit 0, no sanitizer report).
from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Set, Tuple

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # the package from this checkout

SECRET = "py-client-secret"
ASAN = "asan" in os.environ.get("STRATA_BIN", "")
SLOW = 3.0 if ASAN else 1.0  # the sanitizer build is slower to start and to answer
# What the sanitizer builds print when they find a fault: tests/e2e/lib.mjs's SANITIZER_REPORT
# (ERROR: AddressSanitizer, LeakSanitizer, UBSan's "runtime error:") and any other *Sanitizer line
SANITIZER_REPORT = re.compile(r"\w*Sanitizer|runtime error")


def strata_bin() -> str:
    b = os.environ.get("STRATA_BIN")
    if not b or not os.access(b, os.X_OK):
        # not a skip: a suite that cannot run its server has failed
        pytest.fail("STRATA_BIN must name the strata binary (ctest sets it)", pytrace=False)
    return b


_HANDED_OUT: Set[int] = set()


def _pick_range() -> Optional[Tuple[int, int]]:
    """[low, high) outside the kernel's ephemeral range: below it, or above it where a tuned host
    starts the range low; None when neither has room (then bind(0), as before)."""
    lo, hi = 32768, 60999
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo, hi = (int(x) for x in f.read().split()[:2])
    except (OSError, ValueError):
        pass
    if lo - 1024 >= 1000:
        return max(1024, lo - 16384), lo
    if 65535 - hi >= 1000:
        return hi + 1, min(65536, hi + 1 + 16384)
    return None


_PICK = _pick_range()


def free_port() -> int:
    """A port for a server started later, from outside the kernel's ephemeral range: a port from
    bind(0) may meanwhile become an outgoing connection's local port (or a member's retried
    connect to a peer not yet started may connect to itself), and the server's own bind fails."""
    for _ in range(1000):
        port = random.randrange(*_PICK) if _PICK else 0
        if port in _HANDED_OUT:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            got = int(s.getsockname()[1])
        _HANDED_OUT.add(got)
        return got
    raise RuntimeError(f"no free port in {_PICK}")


def jwt(payload: Dict[str, Any], secret: str = SECRET) -> str:
    def b64(b: bytes) -> str:
        return base64.urlsafe_b64encode(b).rstrip(b"=").decode()

    h = b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    p = b64(json.dumps(payload).encode())
    sig = hmac.new(secret.encode(), f"{h}.{p}".encode(), hashlib.sha256).digest()
    return f"{h}.{p}.{b64(sig)}"


def token(sub: str, ttl: float = 600, role: Optional[str] = None, secret: str = SECRET,
          iat: Optional[int] = None) -> str:
    claims: Dict[str, Any] = {"sub": sub, "exp": int(time.time() + ttl)}
    if iat is not None:  # when it was issued (a token from before a user's erasure is refused)
        claims["iat"] = iat
    if role:
        claims["role"] = role
    return jwt(claims, secret)


def admin() -> str:
    return token("ops", role="admin")


class Server:
    """One strata process; stop() checks it exits cleanly."""

    def __init__(self, data_dir: Optional[str] = None, args: Optional[List[str]] = None,
                 port: Optional[int] = None) -> None:
        self.dir = data_dir or tempfile.mkdtemp(prefix="strata-py-")
        self.args = list(args or [])
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = Path(tempfile.mkstemp(prefix="strata-py-log-")[1])
        self.proc: Optional[subprocess.Popen[bytes]] = None
        self.killed = False
        self.start()

    def start(self) -> None:
        self.killed = False
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [strata_bin(), "--listen", f"127.0.0.1:{self.port}", "--data-dir", self.dir,
                 *self.args], stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        until = time.monotonic() + 15 * SLOW
        while time.monotonic() < until:
            if re.search(r"listening on [0-9.]+:(\d+)", self.log()):
                return
            if self.proc.poll() is not None:
                raise RuntimeError(f"strata exited with {self.proc.returncode}:\n{self.log()}")
            time.sleep(0.02)
        raise RuntimeError(f"strata did not start:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait()
        self.killed = True  # nothing runs at exit: stop() does not check this one's end
        self.log_path.write_text("")  # the next start's "listening on" is the one that counts

    def restart(self) -> None:
        self.start()

    def stop(self, expect: int = 0) -> None:
        """SIGTERM unless it already ended; either way it must have exited `expect` (0) with no
        sanitizer report, as tests/e2e/lib.mjs's stop() and ended() check: a crash or a sanitizer
        abort after the last request fails too. Only a kill -9 the test sent is exempt."""
        p = self.proc
        if p is None:
            return
        if p.poll() is None:
            p.send_signal(signal.SIGCONT)
            p.terminate()
            try:
                p.wait(timeout=30 * SLOW)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
                raise AssertionError(f"strata did not stop on SIGTERM:\n{self.log()}")
        code = p.returncode
        if self.killed and code == -signal.SIGKILL:
            return
        log = self.log()
        report = SANITIZER_REPORT.search(log)
        if report:
            raise AssertionError(
                f"strata on port {self.port}: sanitizer report ({report.group(0)}):\n{log[-6000:]}")
        ended = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit {code}"
        assert code == expect, \
            f"strata on port {self.port} ended with {ended}, expected exit {expect}:\n{log[-6000:]}"

    def cleanup(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)
        self.log_path.unlink(missing_ok=True)


@pytest.fixture
def server() -> Iterator[Server]:
    # --jwt-leeway 1: a stream ends at exp + leeway (SPEC §7); the expiring stream's test would
    # wait the default 30 s more for it
    s = Server(args=["--jwt-secret", SECRET, "--jwt-leeway", "1"])
    try:
        yield s
        s.stop()
    finally:
        s.cleanup()


def wait_for(what: str, fn: Any, timeout: float = 15.0) -> None:
    end = time.monotonic() + timeout * SLOW
    while not fn():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


# CI (STRATA_NO_SKIP=1) fails a run in which a test was skipped, as tests/e2e/lib.mjs does.
_skipped: List[str] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped:
        _skipped.append(report.nodeid)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _skipped and os.environ.get("STRATA_NO_SKIP") == "1":
        print(f"\nskipped while STRATA_NO_SKIP=1: {_skipped}")
        session.exitstatus = 1
