"""The options of the co-simulation master, shared by the commands that run an SSP system
(``simulate --ssp``, ``identify --ssp``, ``validate --ssp``), and the settings they make
(:class:`~fmi_adjoint.ssp.master.MasterSettings`)."""

from __future__ import annotations

from ..errors import ModelError

__all__ = ["add_master_options", "master_settings"]


def add_master_options(group, order: str = "--order") -> None:
    """``order`` and --extrapolation: how the co-simulation master runs an SSP system (``simulate
    --ssp`` and ``validate --ssp`` with ``--order``, ``identify --ssp`` with ``--master-order``, as
    identify's ``--order`` is the orders cost's engine order).  The choices are the keys of
    :data:`~fmi_adjoint.ssp.master.ORDERS` and :data:`~fmi_adjoint.ssp.master.APPROXIMATIONS`,
    spelled here so that a parser does not import the master."""
    group.add_argument(order, choices=("jacobi", "gauss-seidel"), default="jacobi",
                       help="jacobi (default): every component steps from the same coupling values, in parallel; "
                       "gauss-seidel: one after another along the connections")
    group.add_argument("--extrapolation", choices=("hold", "linear"), default="hold",
                       help="hold (default): inputs held over the macro step (first order in the step); linear: "
                       "their slopes sent to FMUs that can interpolate inputs (second order)")


def master_settings(args, order: str, model_exchange_part: bool = False):
    """The :class:`~fmi_adjoint.ssp.master.MasterSettings` of ``--step``, the order (``order``:
    its value) and ``--extrapolation`` (``--step`` required: the macro step); with a Model Exchange
    part (``model_exchange_part``) its tolerances from ``--rtol``/``--atol`` (and identify's run
    budget), which are refused without one (they would do nothing)."""
    from ..ssp.master import APPROXIMATIONS, ORDERS, MasterSettings  # noqa: PLC0415 (only for --ssp)
    from .fmu_loading import MODEL_EXCHANGE_OPTIONS, run_tolerances  # noqa: PLC0415 (as above)

    given = {name: getattr(args, name, None) for name in MODEL_EXCHANGE_OPTIONS}
    if not model_exchange_part and any(value is not None for value in given.values()):
        options = " and ".join(f"--{name.replace('_', '-')}" for name, value in given.items() if value is not None)
        raise ModelError(f"{options} apply to Model Exchange components; every component of this co-simulation runs "
                         "its own Co-Simulation solver (the error is set by --step, the macro step); remove them.")
    if args.step is None:
        raise ModelError("--ssp needs --step H, the macro step of the co-simulation in seconds (e.g. --step 1e-3).")
    tolerances = run_tolerances(given["rtol"], given["atol"], None, max_steps=given["max_steps"],
                                max_events=given["max_events"], run_timeout=given["run_timeout"])
    return MasterSettings(step=args.step, order=ORDERS[order], approximation=APPROXIMATIONS[args.extrapolation],
                          model_exchange=tolerances)
