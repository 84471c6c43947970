"""The jail's ``sitecustomize``: ONNX Runtime sessions with bounded pools, computing as the grader's.

ONNX Runtime sizes a session's default intra-op (and inter-op) pool by the host's physical
cores: on a 24-core host a notebook opening three default sessions needs about 70 threads,
which ``RLIMIT_NPROC`` (per uid, threads included) refuses, and the third constructor never
returns. The grader copies this file as ``sitecustomize.py`` into a read-only folder on the
kernel's ``PYTHONPATH`` (:func:`autograder.jail.jail.write_site`); every Python process of the
jail then gives an ``InferenceSession`` whose options leave a pool size at 0 ("default") the
number in ``$AUTOGRADER_KERNEL_THREADS`` instead (the CPUs the grader may use, at most 4).
Explicit sizes are kept. Each session records the options as the notebook asked for them (attribute
``_autograder_requested_options``: both pool sizes, the execution mode and the optimization
level by name; a pool the jail set in an options object the notebook uses again still counts as
its 0), which the probe reports of a session a student's function returns
(autograder/probe_format.py, ``SessionDescription``): a lesson judges ``intra_op_num_threads`` /
``inter_op_num_threads`` as requested, 0 meaning "ONNX Runtime's default".

The same wrapper puts the grader's session configuration (``$AUTOGRADER_ORT_SESSION_CONFIG``, a
JSON object of strings: :data:`autograder.ort_platform.SESSION_CONFIG`) into every session's
options, replacing what the notebook set: int8 products are then exact on every CPU, as in the
grader's own sessions, so what a notebook measures and reports is what the grader re-measures on
any grading machine. A ``sitecustomize`` the interpreter already had is run afterwards.

Self-contained (standard library only): it runs in the student's kernel, not in the grader.
"""

import json
import os
import sys

THREADS_VARIABLE = "AUTOGRADER_KERNEL_THREADS"
CONFIG_VARIABLE = "AUTOGRADER_ORT_SESSION_CONFIG"
MAX_KERNEL_THREADS = 4  # ONNX Runtime's default pool size in the jail (it would take every core)


def kernel_threads():
    """(Grader side) the pool size to put in ``$AUTOGRADER_KERNEL_THREADS``: the CPUs this grader
    may use, at most MAX_KERNEL_THREADS (ONNX Runtime's default is one thread per host core)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(MAX_KERNEL_THREADS, cpus))


def source() -> str:
    """This file's text (what the grader writes into the jail)."""
    with open(__file__) as f:
        return f.read()


def _threads():
    try:
        return max(1, int(os.environ.get(THREADS_VARIABLE, "")))
    except ValueError:
        return None


def session_config():
    """The entries every session of the jail gets (``$AUTOGRADER_ORT_SESSION_CONFIG``), else {}."""
    try:
        config = json.loads(os.environ.get(CONFIG_VARIABLE) or "{}")
    except ValueError:
        return {}
    if not isinstance(config, dict):
        return {}
    return {k: v for k, v in config.items() if isinstance(k, str) and isinstance(v, str)}


POOLS = ("intra_op_num_threads", "inter_op_num_threads")
REQUESTED_ATTRIBUTE = "_autograder_requested_options"  # the probe reads it (autograder/sandbox/probe_kernel.py)


def _name(value):
    name = getattr(value, "name", None)
    return None if value is None else str(name if name is not None else value)


def requested_options(sess_options):
    """The options as the notebook set them, before the jail's rewrite: the pool sizes (0 is ONNX
    Runtime's default), the execution mode and the optimization level by name; {} for an object
    that is not real SessionOptions."""
    try:
        return {
            "intra_op_num_threads": int(sess_options.intra_op_num_threads),
            "inter_op_num_threads": int(sess_options.inter_op_num_threads),
            "execution_mode": _name(sess_options.execution_mode),
            "graph_optimization_level": _name(sess_options.graph_optimization_level),
        }
    except Exception:  # noqa: BLE001 - not real SessionOptions: ONNX Runtime will say so itself
        return {}


def patch_onnxruntime(module, threads, config=None):
    """Make ``module.InferenceSession`` default both pool sizes to ``threads`` (None: leave them)
    and put ``config``'s entries into its options (idempotent)."""
    session, options = getattr(module, "InferenceSession", None), getattr(module, "SessionOptions", None)
    if session is None or options is None or getattr(session, "_autograder_patched", False):
        return
    original, config = session.__init__, dict(config or {})
    set_by_jail = {}  # id(options) -> (options, {pool: size the jail set}): kept alive, so ids stay theirs

    def __init__(self, path_or_bytes, sess_options=None, *args, **kwargs):
        sess_options = kwargs.pop("sess_options", sess_options)
        if sess_options is None:
            sess_options = options()
        requested = requested_options(sess_options)
        rewritten = set_by_jail.get(id(sess_options), (None, {}))[1]
        for pool, value in rewritten.items():  # options reused: what the jail set there was a 0
            if requested.get(pool) == value:
                requested[pool] = 0
        try:
            for pool in POOLS:
                if threads is not None and getattr(sess_options, pool) == 0:
                    setattr(sess_options, pool, threads)
                    set_by_jail.setdefault(id(sess_options), (sess_options, {}))[1][pool] = threads
            for key, value in config.items():
                try:
                    same = sess_options.get_session_config_entry(key) == value
                except Exception:  # noqa: BLE001 - ONNX Runtime raises when the entry is not set
                    same = False
                if not same:
                    sess_options.add_session_config_entry(key, value)
        except Exception:  # noqa: BLE001 - not real SessionOptions: ONNX Runtime will say so itself
            pass
        original(self, path_or_bytes, sess_options, *args, **kwargs)
        try:
            setattr(self, REQUESTED_ATTRIBUTE, requested)
        except Exception:  # noqa: BLE001 - a subclass without a __dict__: no record, the probe reads the session's
            pass

    __init__.__wrapped__ = original
    session.__init__ = __init__
    session._autograder_patched = True
    session._autograder_threads = threads


class _PatchOnImport:
    """A meta path finder that patches ``onnxruntime`` right after it is first executed."""

    def __init__(self, threads, config):
        self.threads, self.config = threads, config

    def find_spec(self, name, path=None, target=None):
        if name != "onnxruntime":
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        loader, threads, config = spec.loader, self.threads, self.config
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run = loader.exec_module

        def exec_module(module):
            run(module)
            patch_onnxruntime(module, threads, config)

        loader.exec_module = exec_module
        return spec


def _chain_previous_sitecustomize():
    """Run the ``sitecustomize`` this one shadows, if the interpreter has one."""
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    paths = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", paths)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


def limit_onnxruntime(threads, config=None):
    """Patch ``onnxruntime`` now if it is imported, else right after its first import (what every
    kernel of the jail gets: a fresh one from this ``sitecustomize``, a template's child from
    ``template_process.fresh_state``). ``config``: :func:`session_config`'s entries."""
    if "onnxruntime" in sys.modules:
        patch_onnxruntime(sys.modules["onnxruntime"], threads, config)
    elif not any(isinstance(f, _PatchOnImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _PatchOnImport(threads, config))


def install():
    threads, config = _threads(), session_config()
    if threads is not None or config:
        limit_onnxruntime(threads, config)
    try:
        _chain_previous_sitecustomize()
    except Exception:  # noqa: BLE001 - the interpreter's own customisation is not ours to fix
        pass


if __name__ == "sitecustomize":
    install()
