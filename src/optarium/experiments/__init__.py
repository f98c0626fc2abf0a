"""Experiments: one module per slug, each registering its claim, methods, scales and verdict rule."""

__all__: list[str] = []
