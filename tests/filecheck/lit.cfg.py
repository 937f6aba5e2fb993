# lit configuration for Lamina's FileCheck tests (run: `lit tests/filecheck -v`).
# Each .mlir file has `// RUN:` lines; `lamina-opt` and `FileCheck` are substituted below.
import os
import shutil
import sys

import lit.formats

config.name = "Lamina"  # noqa: F821 - `config` is provided by lit
config.test_format = lit.formats.ShTest(execute_external=False)  # noqa: F821
config.suffixes = [".mlir"]  # noqa: F821
config.test_source_root = os.path.dirname(__file__)  # noqa: F821
config.excludes = ["Inputs"]  # noqa: F821

python = sys.executable
filecheck = f"{python} -m filecheck"
config.substitutions.append(("FileCheck", filecheck))  # noqa: F821
config.substitutions.append(("%python", python))  # noqa: F821
mlir_opt = shutil.which("mlir-opt-22")
if mlir_opt:
    config.available_features.add("mlir-opt")  # noqa: F821
    config.substitutions.append(("mlir-opt-22", mlir_opt))  # noqa: F821
# Run the checkout's lamina whether or not it is pip-installed. PYTHONPATH is set per command with
# `env`: lit's Python-implemented builtins (cat, diff) overwrite PYTHONPATH for later commands.
repo_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
pythonpath = os.pathsep.join(p for p in (repo_root, os.environ.get("PYTHONPATH", "")) if p)
config.substitutions.append(("lamina-opt", f"env PYTHONPATH={pythonpath} {python} -m lamina.tools.opt"))  # noqa: F821
for var in ("HOME", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "LAMINA_DEBUG"):
    if var in os.environ:
        config.environment[var] = os.environ[var]  # noqa: F821
