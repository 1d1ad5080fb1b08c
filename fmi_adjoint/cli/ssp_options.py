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


def master_settings(args, order: str):
    """The :class:`~fmi_adjoint.ssp.master.MasterSettings` of ``--step``, the order (``order``:
    its value) and ``--extrapolation`` (``--step`` required: the macro step)."""
    from ..ssp.master import APPROXIMATIONS, ORDERS, MasterSettings  # noqa: PLC0415 (only for --ssp)

    if args.step is None:
        raise ModelError("--ssp needs --step H, the macro step of the co-simulation in seconds (e.g. --step 1e-3).")
    return MasterSettings(step=args.step, order=ORDERS[order], approximation=APPROXIMATIONS[args.extrapolation])
