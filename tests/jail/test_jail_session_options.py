"""The jail's session rule (autograder/jail/jail_site.py), unit-tested with a fake ONNX Runtime: the
pools left at 0 get the jail's size, and each session records the options as the notebook asked
for them. The real rule in the real jail: test_adv_probe_artifacts.py."""

from __future__ import annotations

import types

import pytest

from autograder.jail import jail_site


class Options:
    def __init__(self):
        self.intra_op_num_threads = 0
        self.inter_op_num_threads = 0
        self.execution_mode = types.SimpleNamespace(name="ORT_SEQUENTIAL")
        self.graph_optimization_level = types.SimpleNamespace(name="ORT_ENABLE_ALL")


def fake_ort():
    class Session:
        def __init__(self, model, sess_options=None, providers=None):
            self.pools = (sess_options.intra_op_num_threads, sess_options.inter_op_num_threads)

    module = types.SimpleNamespace(InferenceSession=Session, SessionOptions=Options)
    jail_site.patch_onnxruntime(module, 3)
    return module


# (the notebook's pool sizes, what the session runs with, what it records as requested)
TABLE = [
    ((0, 0), (3, 3), (0, 0)),
    ((2, 0), (2, 3), (2, 0)),
    ((0, 5), (3, 5), (0, 5)),
    ((1, 1), (1, 1), (1, 1)),
]


@pytest.mark.parametrize("asked, runs, recorded", TABLE)
def test_a_session_records_the_pools_the_notebook_asked_for(asked, runs, recorded):
    ort = fake_ort()
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = asked
    session = ort.InferenceSession(b"m", options)
    assert session.pools == runs
    requested = getattr(session, jail_site.REQUESTED_ATTRIBUTE)
    assert (requested["intra_op_num_threads"], requested["inter_op_num_threads"]) == recorded
    assert requested["execution_mode"] == "ORT_SEQUENTIAL" and requested["graph_optimization_level"] == "ORT_ENABLE_ALL"


def test_options_used_again_still_count_as_the_notebooks_zero():
    ort = fake_ort()
    options = ort.SessionOptions()
    first = ort.InferenceSession(b"m", options)
    second = ort.InferenceSession(b"m", sess_options=options)
    for s in (first, second):
        assert s.pools == (3, 3)
        assert getattr(s, jail_site.REQUESTED_ATTRIBUTE)["intra_op_num_threads"] == 0
    options.intra_op_num_threads = 2  # the notebook's own change after that counts
    third = ort.InferenceSession(b"m", options)
    assert getattr(third, jail_site.REQUESTED_ATTRIBUTE)["intra_op_num_threads"] == 2


def test_options_that_are_not_real_record_nothing_and_fail_as_before():
    ort = fake_ort()
    with pytest.raises(AttributeError):
        ort.InferenceSession(b"m", object())
    assert jail_site.requested_options(object()) == {}
