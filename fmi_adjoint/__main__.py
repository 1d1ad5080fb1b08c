"""``python -m fmi_adjoint``."""

from .cli import main

main()
