"""ONNX's own shape inference, run in a forked worker process.

ONNX's C++ shape inference kills its process (SIGSEGV, SIGFPE) on some invalid nodes (a
LayerNormalization axis far out of range, an Attention with ``kv_num_heads=0``, ...). The importer
therefore runs it in a forked worker (started once per process, restarted after a crash; in-process
where the OS has no ``fork``); when it dies the import goes on without its types and Lamina's own
checks name the node. Inference reads initializer data only to propagate small shape-like values,
so the data of large initializers is not sent (benchmarks/onnx_import.py).
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
from typing import Any


def onnx_shape_inference(model: Any) -> Any | None:
    """``model`` with the types ONNX's shape inference adds and *without its initializers' data*,
    or None where inference fails. Where the OS has ``fork`` it runs in a forked worker process
    (started once, restarted after a crash): ONNX's C++ inference kills its process (SIGSEGV,
    SIGFPE) on some invalid nodes (a LayerNormalization axis far out of range, ...); the import
    then goes on without it and Lamina's own checks name the node. Inference reads initializer
    data only to propagate small shape-like values, so large weights are not sent."""
    light = _without_weight_data(model)
    if not hasattr(os, "fork"):
        try:
            out = _infer(light.SerializeToString())
        except Exception:
            return None
    else:
        out = _WORKER.infer(light.SerializeToString())
        if out is None:
            return None
    try:
        inferred = type(model)()
        inferred.ParseFromString(out)
    except Exception:
        return None
    return inferred


def _without_weight_data(model: Any) -> Any:
    """A copy of ``model`` whose initializers of more than 4096 elements have dims but no data."""
    light = type(model)()
    light.ir_version = model.ir_version
    light.opset_import.extend(model.opset_import)
    light.functions.extend(model.functions)
    g, lg = model.graph, light.graph
    lg.name = g.name
    lg.node.extend(g.node)
    lg.input.extend(g.input)
    lg.output.extend(g.output)
    lg.value_info.extend(g.value_info)
    for t in g.initializer:
        if t.data_location != 1 and math.prod(t.dims) > 4096:
            nt = lg.initializer.add()
            nt.name, nt.data_type = t.name, t.data_type
            nt.dims.extend(t.dims)
        else:
            lg.initializer.append(t)
    return light


def _infer(data: bytes) -> bytes:
    from onnx import shape_inference

    c = getattr(shape_inference, "C", None)  # bytes to bytes, without a parse and a serialization
    if c is not None:
        return c.infer_shapes(data, False, False, True)  # check_type, strict_mode, data_prop
    return shape_inference.infer_shapes(data, strict_mode=False, data_prop=True).SerializeToString()


class _InferenceWorker:
    """A forked child serving :func:`_infer` over pipes (length-prefixed messages; an empty reply
    means inference failed). Forking once per process, not per model, keeps imports fast."""

    def __init__(self) -> None:
        self.pid = self.owner = 0
        self.req = self.res = -1

    def _start(self) -> None:
        from onnx import shape_inference  # noqa: F401  (imported here: no import lock in the child)

        req_r, req_w = os.pipe()
        res_r, res_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the worker
            try:
                os.close(req_w)
                os.close(res_r)
                import faulthandler

                faulthandler.disable()  # a crash here is expected, not worth a traceback
                null = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(null, fd)
                while True:
                    data = _read_message(req_r)
                    if data is None:
                        break
                    try:
                        out = _infer(data)
                    except Exception:
                        out = b""
                    _write_message(res_w, out)
            finally:
                os._exit(0)
        os.close(req_r)
        os.close(res_w)
        self.pid, self.req, self.res = pid, req_w, res_r

    def _stop(self, kill: bool = False) -> None:
        if kill:
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGKILL)
        for fd in (self.req, self.res):
            with contextlib.suppress(OSError):
                os.close(fd)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)
        self.pid, self.req, self.res = 0, -1, -1

    def infer(self, data: bytes) -> bytes | None:
        """The inferred model's bytes; None if inference failed or crashed the worker."""
        if self.pid and self.owner != os.getpid():  # a forked copy of a process that had one
            self.pid, self.req, self.res = 0, -1, -1
        if not self.pid:
            self._start()
            self.owner = os.getpid()
        try:
            _write_message(self.req, data)
            out = _read_message(self.res)
        except BrokenPipeError:
            out = None
        except BaseException:  # interrupted (a time limit, Ctrl-C): the pipes are out of step
            self._stop(kill=True)
            raise
        if out is None:  # the worker died on this model
            self._stop()
            return None
        return out or None


def _write_message(fd: int, data: bytes) -> None:
    view = memoryview(len(data).to_bytes(8, "little") + data)
    while view:
        view = view[os.write(fd, view) :]


def _read_message(fd: int) -> bytes | None:
    def read(n: int) -> bytes | None:
        parts = []
        while n:
            chunk = os.read(fd, min(n, 1 << 20))
            if not chunk:
                return None
            parts.append(chunk)
            n -= len(chunk)
        return b"".join(parts)

    head = read(8)
    if head is None:
        return None
    return read(int.from_bytes(head, "little"))


_WORKER = _InferenceWorker()
