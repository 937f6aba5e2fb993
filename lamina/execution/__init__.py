"""Executing IR: the reference interpreter for the ``top`` dialect."""

from lamina.execution.interpreter import ExecutionError, Interpreter, result_names, run_module

__all__ = ["ExecutionError", "Interpreter", "result_names", "run_module"]
