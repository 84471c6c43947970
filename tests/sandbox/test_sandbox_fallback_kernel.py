"""The namespace-less fallback jail with a real kernel: under its seccomp rules (io_uring denied,
hole H7; ``connect`` denied, hole H8) the kernel still runs numpy, ONNX Runtime, scikit-learn,
matplotlib, multiprocessing and subprocess, and the attacks those rules close fail.

The fallback runs the grader's interpreter as the sandbox uid. Where that interpreter lives under
a folder others cannot traverse (pyenv in a mode-700 /root), the run happens in a private mount
namespace made for this test, in which a tmpfs over that folder shows only the interpreter's
subfolder; nothing changes outside it.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from namespacekit import reachable_interpreter
from sandbox_helpers import worker_slot, write_notebook

pytestmark = [
    pytest.mark.slow,
    pytest.mark.kernel,
    pytest.mark.root,  # the fallback's sandbox uid
    pytest.mark.skipif(not shutil.which("unshare"), reason="the fallback needs unshare"),
]

RUNNER = r"""
import json, os, sys
from pathlib import Path
os.environ["AUTOGRADER_JAIL"] = "fallback"
from autograder.limits import ExecutionLimits
from autograder.sandbox import run_submission
rec = run_submission(Path(sys.argv[1]), Path(sys.argv[2]), probe=None, slot=int(sys.argv[3]),
                     limits=ExecutionLimits(cell_timeout_s=90, notebook_timeout_s=240, memory_mb=4096))
print(json.dumps(rec))
"""

CELLS = [
    "import json, os\nr = {}\nimport numpy as np\na = np.random.default_rng(0).normal(size=(200, 50))\n"
    "r['numpy'] = float(np.linalg.norm(a.T @ a))",
    "import onnx, onnxruntime as ort\nfrom onnx import TensorProto, helper\n"
    "g = helper.make_graph([helper.make_node('Add', ['x', 'x'], ['y'])], 'g',\n"
    "    [helper.make_tensor_value_info('x', TensorProto.FLOAT, [2])], [helper.make_tensor_value_info('y', TensorProto.FLOAT, [2])])\n"
    "m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 17)])\n"
    "s = ort.InferenceSession(m.SerializeToString(), providers=['CPUExecutionProvider'])\n"
    "r['ort'] = s.run(None, {'x': np.array([1, 2], np.float32)})[0].tolist()",
    "from sklearn.linear_model import LogisticRegression\nX = np.r_[a[:100] - 1, a[100:] + 1]\ny = [0] * 100 + [1] * 100\n"
    "r['sklearn'] = LogisticRegression().fit(X, y).score(X, y)",
    "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.savefig('plot.png')\nr['matplotlib'] = os.path.getsize('plot.png') > 0",
    "open('/dev/shm/' + SHM_NAME, 'w').write('left for the next submission')\nr['shm'] = True",
    "import multiprocessing, subprocess\nwith multiprocessing.Pool(2) as pool:\n    r['multiprocessing'] = pool.map(abs, [-1, -2])\n"
    "r['subprocess'] = subprocess.run(['/bin/echo', 'hi'], capture_output=True, text=True).stdout.strip()",
    # the attacks: a host daemon's Unix socket by path (H8), io_uring (H7), an AF_INET socket
    "import ctypes, socket\ndef attempt(fn):\n    try:\n        fn()\n        return 'DONE'\n    except OSError as e:\n"
    "        return e.errno\ndef unix():\n    s = socket.socket(socket.AF_UNIX)\n    s.connect(SOCKET_PATH)\n    s.sendall(b'x')\n"
    "libc = ctypes.CDLL(None, use_errno=True)\nparams = ctypes.create_string_buffer(120)\n"
    "def uring():\n    if libc.syscall(425, 4, params) < 0:\n        raise OSError(ctypes.get_errno(), 'io_uring_setup')\n"
    "r['connect_unix_path'] = attempt(unix)\nr['io_uring_setup'] = attempt(uring)\n"
    "r['socket_inet'] = attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM))\n"
    "json.dump(r, open('out.json', 'w'))",
]


class UnixServer:
    """A listening Unix socket by path, reachable by anyone: what a host daemon looks like."""

    def __init__(self, folder: Path) -> None:
        self.path = str(folder / "daemon.sock")
        self.received: list[bytes] = []
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.bind(self.path)
        os.chmod(self.path, 0o777)
        self.sock.listen(4)
        self.sock.settimeout(0.2)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
                self.received.append(conn.recv(16) or b"(connected)")
                conn.close()
            except OSError:
                continue

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        self.sock.close()


def test_a_real_kernel_works_under_the_fallback_rules_and_the_attacks_fail(tmp_path):
    base = Path(tempfile.mkdtemp(prefix="autograder-test-fallback-"))
    os.chmod(base, 0o711)
    hold, sockdir = base / "hold", base / "sock"
    hold.mkdir()
    sockdir.mkdir()
    os.chmod(sockdir, 0o777)
    server = UnixServer(sockdir)
    shm = Path("/dev/shm") / f"autograder-test-{os.getpid()}-{worker_slot()}"
    try:
        cells = [f"SOCKET_PATH = {server.path!r}\nSHM_NAME = {shm.name!r}"] + CELLS
        nb = write_notebook(tmp_path, cells)
        ws = base / "ws"
        script = "set -e\n" + reachable_interpreter(hold) + f'exec "$0" -c "$1" {nb} {ws} {worker_slot()}\n'
        proc = subprocess.run(
            ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, sys.executable, RUNNER],
            capture_output=True,
            text=True,
            timeout=400,
            cwd=str(Path(__file__).resolve().parents[2]),
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        rec = json.loads(proc.stdout.strip().splitlines()[-1])
        iso = rec["isolation"]
        if rec["status"] == "startup_failed" or iso["mode"] != "fallback":
            pytest.skip(f"the fallback cannot start a kernel here: {rec['reason']} {iso}")
        assert rec["status"] == "completed", (rec["reason"], rec["cells"])
        assert {"seccomp", "landlock", "workspace_tmpfs"} <= set(iso["layers"]), iso
        out = json.loads((ws / "out.json").read_text())
        assert out["numpy"] > 0 and out["ort"] == [2.0, 4.0] and out["sklearn"] > 0.9, out
        assert out["matplotlib"] is True and out["multiprocessing"] == [1, 2] and out["subprocess"] == "hi", out
        assert out["connect_unix_path"] == 1, f"connect() to a host socket by path was not denied: {out}"
        assert out["io_uring_setup"] == 1, f"io_uring_setup was not denied: {out}"
        assert out["socket_inet"] == 97, out
        assert server.received == [], f"the host's Unix socket was reached: {server.received}"
        assert out["shm"] is True and not shm.exists(), "a file the kernel left in /dev/shm outlived the run"
    finally:
        server.close()
        shutil.rmtree(base, ignore_errors=True)
        shm.unlink(missing_ok=True)
