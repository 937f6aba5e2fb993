"""The flows: what each command does, as library functions taking Python values (paths, arrays,
tables, options) and returning results. The commands (:mod:`lamina.tools`) only parse their flags,
check what is about argv and print; :mod:`lamina.api` checks its arguments and calls the same flows.

* :mod:`.transform` — ``model_transform``: ONNX or TFLite → ``top`` .mlir, checked against
  onnxruntime or LiteRT (a full-integer TFLite model also gives its calibration table);
* :mod:`.run` — ``model_runner``: a ``.mlir`` (``top`` or ``tpu``), ``.onnx`` or ``.tflite`` model
  on inputs;
* :mod:`.calibrate` — ``run_calibration``: the calibration table, the mixed-precision search;
* :mod:`.deploy` — ``model_deploy``: ``top`` → quantized ``tpu``, run and compared.

Floor 7 (docs/architecture.md): above everything they combine, below the commands and the API.
Errors are :class:`~lamina.support.errors.ToolError` (bad options: ``UsageError``).
"""
