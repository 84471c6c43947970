"""The quantization building blocks: what only a lesson about integer quantization uses.

- :mod:`.facts`: how a model is quantized (the ``"quantization"`` fact group) and whether it was
  derived from a given fp32 model (the ``"derived_from"`` pair group);
- :mod:`.weights`: the quantized weights of a graph (scale, zero point, channel axis);
- :mod:`.input_quant`: the input range a static model's calibration fixed;
- :mod:`.reference_ops`: ONNX Runtime's own ``QuantizeLinear``/``DequantizeLinear`` and its
  quantizer's MinMax rule, as references for a lesson's contracted functions.

Everything here builds on the generic :mod:`autograder.measure` modules, never the other way round.
"""
