"""The ONNX front end: ``import_onnx(path_or_model, ...)`` → a ``top`` module."""

from lamina.frontends.onnx.importer import CONVERTERS, OnnxImportError, import_onnx, load_model, register

__all__ = ["CONVERTERS", "OnnxImportError", "import_onnx", "load_model", "register"]
