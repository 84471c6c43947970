"""The grader's ONNX measuring child in the jail (autograder/measure/onnx_load.py): what a child
taken over by a hostile model (a memory-safety bug in onnx or ONNX Runtime) could do.

Each test replaces the worker's command with a small program standing for such a child; the
jail around it is the real one.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from autograder.measure import onnx_load, worker_process
import autograder.jail as jail_api
from autograder.jail import jail
from waiting import returns

ROOT = Path(__file__).resolve().parents[2]
RUBRIC = ROOT / "assignments" / "07-quantization" / "rubric.toml"
INPUTS = {"t": np.zeros((1, 2), np.float32)}

TAKEN_OVER = r"""
import ctypes, json, os, socket, sys
out = {"uid": os.getuid()}
for name, path in (("rubric", RUBRIC), ("package", PACKAGE_FILE), ("grader_tmp", GRADER_TMP_FILE),
                   ("shadow", "/etc/shadow")):
    try:
        with open(path) as f:
            f.read(1)
        out[name] = "read"
    except OSError as e:
        out[name] = type(e).__name__
for name, path in (("write_package", PACKAGE_FILE + ".planted"), ("write_tmp_host", HOST_TMP_FILE)):
    try:
        open(path, "w").write("planted")
        out[name] = "written"
    except OSError as e:
        out[name] = type(e).__name__
try:
    s = socket.create_connection(("127.0.0.1", PORT), timeout=2)
    s.sendall(b"x")
    out["loopback"] = "connected"
except OSError as e:
    out["loopback"] = type(e).__name__
libc = ctypes.CDLL(None, use_errno=True)
out["unshare_user"] = libc.unshare(0x10000000)
out.update({k: v.strip() for k, _, v in (l.partition(":") for l in open("/proc/self/status"))
            if k in ("CapEff", "NoNewPrivs", "Seccomp")})
json.dump({"ok": True, "facts": out}, open("result.json", "w"))
"""


def _child(monkeypatch, source: str) -> None:
    monkeypatch.setattr(worker_process, "_worker_command", lambda job_dir: [sys.executable, "-c", source])


@pytest.fixture
def measure_jail():
    iso = jail.measure_isolation()
    if iso is None:
        pytest.skip("bubblewrap does not work here: the measuring child runs with rlimits only")
    return iso


@pytest.mark.kernel  # starts jailed children (tests/needs.py)
def test_a_taken_over_child_reaches_nothing(measure_jail, monkeypatch, tmp_path):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(0.2)
    got: list[bytes] = []
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                conn, _ = server.accept()
                got.append(conn.recv(8) or b"(connected)")
                conn.close()
            except OSError:
                continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    host_tmp = tmp_path / "planted-by-the-child"
    grader_file = tmp_path / "grader-only.txt"
    grader_file.write_text("grader-only")
    package_file = str(Path(onnx_load.__file__).resolve().parent.parent / "__init__.py")
    source = (
        f"RUBRIC = {str(RUBRIC)!r}\nPACKAGE_FILE = {package_file!r}\nHOST_TMP_FILE = {str(host_tmp)!r}\n"
        f"GRADER_TMP_FILE = {str(grader_file)!r}\n"
        f"PORT = {server.getsockname()[1]}\n" + TAKEN_OVER
    )
    _child(monkeypatch, source)
    try:
        r = onnx_load.run_model_worker(b"not a model", inputs=INPUTS)
    finally:
        stop.set()
        thread.join(5)
        server.close()
    assert r.ok, r.reason
    out = r.result["facts"]
    assert out["package"] == "read", f"the worker cannot import the grader's package: {out}"
    assert {out[k] for k in ("rubric", "grader_tmp", "shadow")} <= {"FileNotFoundError", "PermissionError"}, out
    assert out["write_package"] != "written" and out["write_tmp_host"] != "written" and not host_tmp.exists(), out
    assert out["loopback"] != "connected" and got == [], f"the child reached the grader's loopback: {out} {got}"
    assert out["CapEff"] == "0000000000000000" and out["NoNewPrivs"] == "1", out
    if os.geteuid() == 0:
        assert out["uid"] == measure_jail.user.uid and measure_jail.user.name == jail.MEASURE_USER, out
    if measure_jail.seccomp:
        assert out["Seccomp"] == "2" and out["unshare_user"] == -1, out


@pytest.mark.kernel  # starts jailed children (tests/needs.py)
@pytest.mark.parametrize("plant", ["fifo", "symlink", "huge", "list"])
def test_a_forged_result_file_is_refused_without_blocking(monkeypatch, plant):
    """The child owns its job folder: result.json may be anything; the grader must not hang or follow."""
    make = {
        "fifo": "os.mkfifo('result.json')",
        "symlink": "os.symlink('/etc/passwd', 'result.json')",
        "huge": "open('result.json', 'w').write('[' + '1,' * (3 << 20) + '1]')",
        "list": "open('result.json', 'w').write('[1, 2]')",
    }[plant]
    _child(monkeypatch, f"import os\n{make}\n")
    r = returns(lambda: onnx_load.run_model_worker(b"not a model", inputs=INPUTS), f"reading a {plant} result.json")
    assert not r.ok and "without a result" in r.reason, r.reason
    assert "root:" not in r.reason


@pytest.mark.kernel  # starts jailed children (tests/needs.py)
def test_the_childs_output_is_kept_out_of_its_reach_and_only_its_end_read(monkeypatch):
    flood = (
        "import os, sys\nfor _ in range(200):\n    sys.stderr.write('x' * 50_000 + '\\n')\n"
        "sys.stderr.write('the last words\\n')\nfor n in os.listdir('.'):\n"
        "    assert not n.startswith('stderr'), n\nsys.exit(5)"
    )
    _child(monkeypatch, flood)
    r = onnx_load.run_model_worker(b"not a model", inputs=INPUTS)
    assert not r.ok and r.reason == "the model worker stopped (exit 5) without a result: the last words", r.reason


def test_without_the_jail_the_child_still_runs_with_rlimits(monkeypatch):
    monkeypatch.setattr(jail_api, "measure_isolation", lambda: None)  # the name the measuring side uses
    _child(
        monkeypatch,
        "import json, os, resource\njson.dump({'ok': True, 'facts': {'uid': os.getuid()}}, open('result.json', 'w'))",
    )
    r = onnx_load.run_model_worker(b"not a model", inputs=INPUTS)
    assert r.ok and r.result["facts"]["uid"] == os.getuid(), r
