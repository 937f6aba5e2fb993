"""The units of ``convert-top-to-tpu`` (the pass itself is :mod:`..transforms.lowering`):

* :mod:`.policy` — the quantized-type policy: which type each value gets (symmetric / asymmetric
  8-bit types from calibrated ranges, the mode's float types) and the type converter;
* :mod:`.per_channel` — per-channel planning: which values get per-axis quantized types;
* :mod:`.state` — one run's state: modes per op (qtable), casts made so far, weights;
* :mod:`.pattern` — :class:`~.pattern.FamilyLowering`, the base of the per-family conversion
  patterns (float lowering, operand/result quantization helpers); each family's pattern lives next
  to its ops in :mod:`..families`.
"""
