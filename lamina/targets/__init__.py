"""Compilation targets: one package per machine Lamina compiles for."""
