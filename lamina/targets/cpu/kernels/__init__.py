"""The CPU target's kernel templates."""
