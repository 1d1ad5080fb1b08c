"""Bundled example models (TOML files next to this module)."""

from __future__ import annotations

from pathlib import Path

from ..errors import ModelError

__all__ = ["EXAMPLES_DIR", "example_names", "example_path"]

EXAMPLES_DIR = Path(__file__).resolve().parent


def example_names() -> list[str]:
    """Names of the bundled examples."""
    return sorted(p.stem for p in EXAMPLES_DIR.glob("*.toml"))


def example_path(name: str) -> Path:
    """Path of the bundled example ``name`` (ModelError listing the names if unknown)."""
    path = EXAMPLES_DIR / f"{name}.toml"
    if name not in example_names():
        raise ModelError(f"no bundled example named {name!r}. Examples: {', '.join(example_names())}.")
    return path
