"""The TFLite front end: ``.tflite`` flatbuffers (read with the ``tflite`` schema package, no
TensorFlow) into the ``top`` dialect; LiteRT as the reference runtime (:mod:`.runtime`)."""

from .importer import import_tflite, import_tflite_file
from .reader import TfliteImportError, TfliteModel, load_model, parse_model

__all__ = [
    "TfliteImportError",
    "TfliteModel",
    "import_tflite",
    "import_tflite_file",
    "load_model",
    "parse_model",
]
