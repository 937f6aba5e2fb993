"""The ``tpu`` ops by family, each module holding its ops, their integer form and the family's
lowering pattern (a :class:`~lamina.dialects.tpu.lowering.pattern.FamilyLowering` rooted on the
``top`` op classes it converts):

* :mod:`.common` — :class:`~.common.TpuOp`, the common definition shared with ``top``
  (:func:`~.common.declare`), float-mode execution, integer helpers;
* :mod:`.conv` — Conv, MatMul; :mod:`.binary` — Add, Sub, Mul; :mod:`.pool` — MaxPool, AvgPool;
  :mod:`.reduce` — Reduce; :mod:`.movement` — Concat and the data-movement ops;
  :mod:`.activation` — elementwise activations as ``tpu.Lut``;
* :mod:`.plumbing` — ``tpu.Cast``, ``tpu.Requant``, ``tpu.Weight`` (no ``top`` counterpart);
* :mod:`.float_mode` — every other op, float mode only.

The registry (every class, the pattern list) is :mod:`lamina.dialects.tpu.ops`.
"""
