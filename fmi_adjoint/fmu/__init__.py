"""FMU import: any FMI 2/3 FMU identified through its binary (archive checks, sandboxed
worker processes, Model Exchange integration with exact sensitivities, gradient paths,
hand-back).  Export lives in :mod:`fmi_adjoint.export`."""
