"""Lamina IR core."""
