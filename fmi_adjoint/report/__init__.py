"""Reports people can read: a self-contained HTML page of an identification (and, from
:mod:`~fmi_adjoint.report.design` and :mod:`~fmi_adjoint.report.validation`, of an input
design and an FMU validation), and the measured / initial / identified signals they show.

- :mod:`~fmi_adjoint.report.signals`: :func:`compare_fit`, every experiment's every channel
  as a :class:`ChannelComparison` (also drawn by ``identify --plot``);
- :mod:`~fmi_adjoint.report.html`: :class:`Page`, a small builder of one self-contained,
  escaped HTML file with Plotly figures (the library inlined once, no network);
- :mod:`~fmi_adjoint.report.identification`: :func:`identification_report`, the page of a
  RESULT.json payload.

Nothing is imported here at import time beyond the names below (Plotly is imported when a
page is written).
"""

from __future__ import annotations

from .signals import ChannelComparison, compare_fit

__all__ = ["ChannelComparison", "compare_fit"]
