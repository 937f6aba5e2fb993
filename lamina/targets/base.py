"""What every target provides, and the one registry of targets.

A target (``lamina/targets/<kind>/``) compiles a lowered ``tpu`` module into a ``.lamina`` model
file (:mod:`lamina.targets.container`) and runs such files. It plugs in through two objects:

* a :class:`Target` — chosen by ``model_deploy --processor NAME`` (:func:`get_target`): its
  :attr:`~Target.capabilities` steer ``convert-top-to-tpu`` (what the target runs natively), and
  :meth:`~Target.compile` turns the ``tpu`` module into a :class:`CompileResult` (the container to
  write, where each layer runs, the lines ``model_deploy`` prints);
* a :class:`CompiledModel` — what :func:`load_model_file` (``lamina.runtime.load``,
  ``model_runner --model M.lamina``) returns for a file of the target's kind: ``input_names``,
  ``output_names``, ``run(inputs)`` with outputs keyed by the model's output names and dequantized
  to float32, and a profile of the last run in the shared format (:mod:`lamina.targets.profile`).

The target package registers by name here (:data:`TARGET_PACKAGES`): a package named in it must
define ``PROCESSORS`` (the ``--processor`` names it compiles for), ``target(processor,
options) -> Target`` and ``load(model, path, **options) -> CompiledModel`` (functions of the
package itself: a submodule named ``target`` or ``load`` would shadow them once imported). Packages
are imported only when asked for.
"""

from __future__ import annotations

import importlib
import os
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lamina.dialects.tpu.capabilities import TargetCapabilities
from lamina.support.errors import LaminaError, ToolError

from .container import Model, TensorDesc, read_model
from .profile import CommandRecord, write_profile

__all__ = [
    "FLOAT_COSINE",
    "TARGET_PACKAGES",
    "CompileOptions",
    "CompileResult",
    "CompiledModel",
    "Target",
    "get_target",
    "is_model_file",
    "load_model_file",
    "processors",
]

#: The least cosine between a compiled model's float outputs and the ``tpu`` interpreter's
#: (:meth:`Target.float_cosine`'s default).
FLOAT_COSINE = 0.99999

#: container target kind → the package implementing it
TARGET_PACKAGES: dict[str, str] = {
    "npu": "lamina.targets.npu",
    "cpu": "lamina.targets.cpu",
}


@dataclass
class CompileOptions:
    """What ``model_deploy`` passes to :meth:`Target.compile` besides the module.

    ``name``: the model's name (the file's ``io`` section); ``mode``: the quantization mode it was
    lowered in; ``disable_layer_group``: NPU — every op alone, through DDR; ``threads``: CPU — the
    thread pool's default size; ``extra``: target-specific settings, by name."""

    name: str
    mode: str = "F32"
    disable_layer_group: bool = False
    threads: int = 1
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class CompileResult:
    """What compiling produced: the ``.lamina`` contents, where each layer runs (layer name →
    ``npu``/``cpu``/... in network order) and the lines ``model_deploy`` prints about it."""

    model: Model
    placement: dict[str, str] = field(default_factory=dict)
    report: list[str] = field(default_factory=list)


class Target(ABC):
    """One ``--processor``: what it runs natively and how it compiles."""

    #: the ``--processor`` name (``cpu``, ``lnpu``, ``lnpu-edge``, a user chip's name)
    processor: str
    #: the container's target kind (``cpu``, ``npu``)
    kind: str

    @property
    @abstractmethod
    def capabilities(self) -> TargetCapabilities:
        """What the target runs natively (``convert-top-to-tpu`` and the search consult it)."""

    @property
    def modes(self) -> tuple[str, ...]:
        """The quantization modes a whole model may be deployed in for this target."""
        return ("F32", "F16", "BF16", "INT8")

    def float_cosine(self, mode: str) -> float:
        """The least cosine ``model_deploy`` accepts between a compiled model's outputs that are not
        checked bit for bit and the interpreter's, for a model deployed in ``mode``
        (:data:`FLOAT_COSINE` unless the target says otherwise)."""
        return FLOAT_COSINE

    @abstractmethod
    def compile(self, module: Any, options: CompileOptions) -> CompileResult:
        """Compile a lowered ``tpu`` module (left untouched). Raises :class:`ToolError` for what
        a user can fix; anything else is a bug in Lamina."""


class CompiledModel(ABC):
    """A loaded ``.lamina`` model, ready to run.

    Subclasses implement :meth:`_run` (arrays by input name, checked and converted to the input
    descriptors' dtypes → arrays by output name) and, to be profiled, set :attr:`last_records`
    during a run."""

    def __init__(self, model: Model, path: str) -> None:
        self.model = model
        self.path = path
        self.last_records: list[CommandRecord] | None = None
        self.last_profile: dict[str, Any] | None = None

    # -- what the file says ------------------------------------------------------------------------

    @property
    def target(self) -> str:
        return self.model.target

    @property
    def chip(self) -> str:
        return self.model.chip

    @property
    def name(self) -> str:
        return self.model.name

    @property
    def inputs(self) -> list[TensorDesc]:
        return list(self.model.inputs)

    @property
    def outputs(self) -> list[TensorDesc]:
        return list(self.model.outputs)

    @property
    def input_names(self) -> list[str]:
        return [t.name for t in self.model.inputs]

    @property
    def output_names(self) -> list[str]:
        return [t.name for t in self.model.outputs]

    #: the profile's clock (cycles per second) and peak MACs per cycle (a CPU: 1 GHz of nanoseconds)
    clock_hz: float = 1e9
    peak_macs_per_cycle: float = 0.0

    # -- running -----------------------------------------------------------------------------------

    def check_inputs(self, inputs: Any, source: str = "inputs") -> dict[str, np.ndarray]:
        """The model's inputs from ``inputs`` — arrays by input name (a single unnamed array feeds a
        single-input model), a list of arrays in input order, or one array for a one-input model —,
        shapes checked and dtypes converted to the descriptors'; a :class:`ToolError` naming the input
        otherwise."""
        from lamina.frontends.model_io import Signature, check_inputs

        names = self.input_names
        if isinstance(inputs, (list, tuple)):
            if len(inputs) != len(names):
                raise ToolError(f"{source}: the model has {len(names)} input(s), got {len(inputs)} array(s)")
            inputs = dict(zip(names, inputs))
        elif isinstance(inputs, np.ndarray) and len(names) == 1:
            inputs = {names[0]: inputs}
        elif not isinstance(inputs, Mapping):
            raise ToolError(
                f"{source} must be arrays by input name (a dict), a list of arrays in input order or "
                f"one array for a one-input model, got {type(inputs).__name__}"
            )
        bad = next((k for k in inputs if not isinstance(k, str)), None)
        if bad is not None:
            raise ToolError(f"{source}: input names must be str, got {bad!r}")
        sig = Signature(
            [t.name for t in self.model.inputs],
            [tuple(t.shape) for t in self.model.inputs],
            [np.dtype(_numpy_dtype(t.dtype)) for t in self.model.inputs],
            [t.name for t in self.model.outputs],
        )
        return check_inputs(dict(inputs), sig, source)

    def run(self, inputs: Any, profile: str | os.PathLike[str] | None = None) -> dict[str, np.ndarray]:
        """Run the model on ``inputs`` (arrays by input name, a list in input order, or one array for a
        one-input model: :meth:`check_inputs`); outputs by output name, dequantized
        to float32. With ``profile`` (``trace.json``), also writes the Chrome trace and its summary
        (``trace.summary.json``) of this run; :attr:`last_profile` holds the summary. Neither may be
        the model's own file (checked before the run)."""
        feeds = self.check_inputs(inputs)
        if profile is not None:
            from lamina.support.paths import check_outputs

            from .profile import summary_path

            if not isinstance(profile, (str, os.PathLike)):
                raise ToolError(f"profile must be a path (str or os.PathLike), got {type(profile).__name__}")
            trace = os.fspath(profile)
            check_outputs(
                [("the model file", self.path)],
                [("profile", trace), ("the profile summary", summary_path(trace))],
            )
        self.last_records = None
        outs = self._run(feeds)
        if profile is not None:
            if self.last_records is None:
                raise ToolError(f"'{self.path}': this {self.target} model records no profile")
            self.last_profile = write_profile(
                os.fspath(profile),
                self.last_records,
                self.clock_hz,
                self.peak_macs_per_cycle,
                process_name=f"{self.name} ({self.chip})",
                extra=self.profile_extra(),
            )
        return outs

    def profile_extra(self) -> dict[str, Any]:
        """Fields a target adds to the profile summary (the chip, the model)."""
        return {"model": self.name, "target": self.target, "chip": self.chip}

    @abstractmethod
    def _run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run on checked inputs; outputs by output name (float32 unless the output is not a float)."""


def _numpy_dtype(name: str) -> Any:
    if name == "bfloat16":
        import ml_dtypes

        return ml_dtypes.bfloat16
    return name


# ---- the registry ------------------------------------------------------------------------------------


def _package(kind: str) -> Any | None:
    """The target package of a container kind, or None when it is not built (yet)."""
    mod = TARGET_PACKAGES.get(kind)
    if mod is None:
        return None
    try:
        pkg = importlib.import_module(mod)
    except ModuleNotFoundError as e:
        if e.name is not None and mod.startswith(e.name):
            return None
        raise
    return pkg if hasattr(pkg, "target") and hasattr(pkg, "load") else None


def processors() -> dict[str, str]:
    """Every ``--processor`` name a built target compiles for → its container kind."""
    out: dict[str, str] = {}
    for kind in TARGET_PACKAGES:
        pkg = _package(kind)
        if pkg is not None:
            for p in pkg.PROCESSORS:
                out[p] = kind
    return out


def get_target(processor: str, **options: Any) -> Target | None:
    """The target compiling for ``processor`` (``options`` as its package takes them, e.g. the NPU's
    ``chip_config``), or None when no built target compiles for it."""
    kind = processors().get(processor)
    pkg = None if kind is None else _package(kind)
    if pkg is None:
        return None
    t: Target = pkg.target(processor, **options)
    return t


def is_model_file(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a file starting with the ``.lamina`` magic (whatever its extension:
    ``model_deploy --model x.bmodel`` writes one too)."""
    from .container import MAGIC

    try:
        with open(os.fspath(path), "rb") as f:
            return f.read(len(MAGIC)) == MAGIC
    except OSError:
        return False


def load_model_file(path: str | os.PathLike[str], **options: Any) -> CompiledModel:
    """Read and check a ``.lamina`` file and load it with its target's runtime (``options`` as the
    target takes them: ``threads`` for the CPU, ``chip_config`` for an NPU of a user's chip, ...)."""
    p = os.fspath(path)
    model = read_model(p)
    pkg = _package(model.target)
    if pkg is None:
        raise LaminaError(
            f"'{p}': a model for target '{model.target}', which this Lamina cannot run "
            f"(it runs: {', '.join(k for k in TARGET_PACKAGES if _package(k) is not None) or 'none'})"
        )
    _check_options(pkg.load, options, f"'{p}': a model for target '{model.target}'")
    cm: CompiledModel = pkg.load(model, p, **options)
    return cm


def _check_options(load: Any, options: Mapping[str, Any], what: str) -> None:
    """Options a target's ``load`` does not take, or a path option that is not a path, are one
    :class:`LaminaError` (not a ``TypeError`` from the call)."""
    import inspect

    params = list(inspect.signature(load).parameters.values())[2:]  # after (model, path)
    if not any(q.kind is q.VAR_KEYWORD for q in params):
        known = [q.name for q in params]
        unknown = [k for k in options if k not in known]
        if unknown:
            raise LaminaError(
                f"{what} takes no option {', '.join(repr(k) for k in unknown)} "
                f"(it takes: {', '.join(known) or 'none'})"
            )
    cfg = options.get("chip_config")
    if cfg is not None and not isinstance(cfg, (str, os.PathLike)):
        raise LaminaError(f"chip_config must be a path (str or os.PathLike), got {type(cfg).__name__}")
