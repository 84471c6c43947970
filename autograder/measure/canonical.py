"""A model's size without what can be padded: its canonical re-serialisation.

Pure (onnx + numpy). File sizes compared raw can be moved by bytes that compute nothing: a long
``doc_string``, metadata, long tensor or node names, ``value_info`` annotations, unused
initializers and dead nodes, or the same numbers written in a wordier encoding (``float_data``
instead of ``raw_data``). :func:`canonical_model` removes all of that, so that
``len(canonical_model(m).SerializeToString())`` counts what the model needs to compute its
outputs: its live nodes, their attributes and the bytes of the constants they read.

Normalised: model and graph doc strings, producer, domain, model version and metadata; node names
and doc strings; every tensor name but the model's inputs and outputs (renamed ``t0, t1, …`` in
order of appearance); symbolic dimension names and type denotations; ``value_info``; opset
imports of domains no node uses; initializers no live node reads (dead nodes are dropped first);
constant tensors re-encoded as ``raw_data``. Kept: the live nodes in their order, their op types,
domains and attributes, the constants' values, the interface's names and types.
"""

from __future__ import annotations

from typing import Any

import onnx
from onnx import numpy_helper

from .graph_index import live_nodes, subgraphs


def _reencode(t: onnx.TensorProto, name: str) -> onnx.TensorProto:
    """The same tensor as ``raw_data`` under ``name`` (unchanged but renamed if it cannot be)."""
    try:
        out = numpy_helper.from_array(numpy_helper.to_array(t), name)
    except Exception:  # noqa: BLE001 - a type numpy_helper cannot round-trip: keep the encoding, drop the rest
        out = onnx.TensorProto()
        out.CopyFrom(t)
        out.name = name
        out.ClearField("doc_string")
    return out


class _Names:
    def __init__(self, keep: set[str]):
        self.map = {k: k for k in keep}

    def __call__(self, name: str) -> str:
        if not name:
            return name
        if name not in self.map:
            self.map[name] = f"t{len(self.map)}"
        return self.map[name]


def _value_info(vi: onnx.ValueInfoProto, names: _Names, dims: _Names) -> None:
    vi.name = names(vi.name)
    vi.ClearField("doc_string")
    t = vi.type
    t.ClearField("denotation")
    if t.HasField("tensor_type") and t.tensor_type.HasField("shape"):
        for d in t.tensor_type.shape.dim:
            d.ClearField("denotation")
            if d.HasField("dim_param"):
                d.dim_param = dims(d.dim_param)


def _graph(g: onnx.GraphProto, names: _Names, dims: _Names, top: bool) -> None:
    nodes = [n for n in g.node]
    if top:  # subgraph outputs are read by their If/Loop node, so only the main graph is pruned
        live = live_nodes(g, nodes)
        nodes = [n for n in nodes if id(n) in live]
    kept = [onnx.NodeProto() for _ in nodes]
    for k, n in zip(kept, nodes):
        k.CopyFrom(n)
    read = {i for n in kept for i in n.input if i} | {o.name for o in g.output}
    for n in kept:
        for sub in subgraphs(n):
            read |= {i for sn in sub.node for i in sn.input if i}
    inits = [t for t in g.initializer if t.name in read or not top]
    g.ClearField("doc_string")
    g.name = "g"
    del g.value_info[:]
    for vi in list(g.input) + list(g.output):
        _value_info(vi, names, dims)
    new_inits = [_reencode(t, names(t.name)) for t in inits]
    del g.initializer[:]
    g.initializer.extend(new_inits)
    for n in kept:
        n.ClearField("name")
        n.ClearField("doc_string")
        for i, x in enumerate(n.input):
            n.input[i] = names(x)
        for i, x in enumerate(n.output):
            n.output[i] = names(x)
        for a in n.attribute:
            a.ClearField("doc_string")
            if a.type == onnx.AttributeProto.TENSOR:
                a.t.CopyFrom(_reencode(a.t, ""))
        for sub in subgraphs(n):
            _graph(sub, names, dims, top=False)
    del g.node[:]
    g.node.extend(kept)


def canonical_model(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of ``model`` with everything that computes nothing removed or normalised (see the
    module's docstring); it computes the same outputs from the same inputs."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for field in ("doc_string", "producer_name", "producer_version", "domain", "model_version"):
        m.ClearField(field)
    del m.metadata_props[:]
    keep = {i.name for i in m.graph.input} | {o.name for o in m.graph.output}
    _graph(m.graph, _Names(keep), _Names(set()), top=True)
    used = {""} | {n.domain for n in _all_nodes(m.graph)}
    opsets = [o for o in m.opset_import if (o.domain or "") in used or o.domain in ("", "ai.onnx")]
    del m.opset_import[:]
    m.opset_import.extend(opsets)
    return m


def _all_nodes(g: onnx.GraphProto):
    for n in g.node:
        yield n
        for sub in subgraphs(n):
            yield from _all_nodes(sub)


def size_facts(model: onnx.ModelProto) -> dict[str, Any]:
    """``canonical_bytes`` (the canonical model serialised) and ``canonical_constant_bytes`` (of
    which the constants' data: initializers and Constant nodes' values)."""
    c = canonical_model(model)
    constant = sum(len(t.raw_data) for t in c.graph.initializer)
    constant += sum(
        len(a.t.raw_data) for n in _all_nodes(c.graph) for a in n.attribute if a.type == onnx.AttributeProto.TENSOR
    )
    return {"canonical_bytes": len(c.SerializeToString()), "canonical_constant_bytes": constant}
