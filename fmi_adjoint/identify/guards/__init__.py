"""Guards of an identification: inputs and outcomes that give silently wrong results (issue 32,
part 3; issue 26, parts 4 and 8).

Each guard either refuses the input (a :class:`~fmi_adjoint.errors.DataError` naming the
cause and the fix, at the front door: :func:`check_data_start` and :func:`check_data_end` run
where the data meet the end time, in :func:`~fmi_adjoint.identify.data_costs.build_cost`) or
returns a :class:`Notice`, a frozen value the command line prints and records in the result's
``warnings``; a notice with ``untrusted`` set makes the result's ``success`` false.  This
module never prints.

The guards, and why each decides as it does:

* **Data far from t = 0** (:func:`check_data_start`): every run starts at t = 0.  Data on a
  test bench's clock (first sample at 1234.5 s) are compared with the model's response
  1234.5 s after its start, long after the transient that carries the information: the fit
  then "converges" where the response no longer depends on the parameters.  Refused when
  the first sample lies later than both the record's own length and the model's end time
  (an offset a trimmed transient cannot explain); an explicit ``--t-end`` says the run is
  meant to cover it.  Samples before t = 0 are refused as well (the model has no response
  there).
* **Data beyond the end time** (:func:`check_data_end`): a last sample later than the
  model's (or the FMU's ``DefaultExperiment``) end time, without ``--t-end``, is refused:
  the run would be extended past the end of the experiment the model describes, with
  whatever excitation it defines there.  ``--t-end T`` covering the data states that the
  experiment ran that long; a window (``--data FILE@window=0:T``) keeps the samples up to
  the end time.  Past an explicit ``--t-end`` the samples are refused as well
  (:func:`~fmi_adjoint.identify.data_costs.build_cost`).  An FMU without a declared stop
  time has no end time to exceed: its run ends at the last sample.
* **Channels of different units pooled** (:func:`data_notices`): the time-domain least
  squares of Oberpeilsteiner (2018), eq. (4.2), sums the residuals of all channels with
  the weights ``W = diag(weight_c / scale_c**2)``, and the standard errors use one residual
  variance ``s^2 = r.r / (N - n_p)`` (Bard 1974, Sec. 7-5).  Channels in different units
  (m/s^2 and m) without a scale are weighted by their numbers, and ``s^2`` mixes their
  noise: a warning names the channels, their units, and the scales (each channel's noise
  level estimated from the data) that make the residuals comparable.
* **An output that cannot see a parameter** (:func:`sensitivity_notices`, at the start):
  the residual Jacobian ``J_r = dr/dp`` of a least-squares problem, each column scaled by
  its parameter's size ``|p_k|`` (the range of its bounds where ``p_k = 0``), gives each
  parameter's reach ``s_k = ||J_r[:, k]|| |p_k|``: the change of the weighted residuals
  when the parameter changes by its own size.  ``s_k = 0`` (the compared outputs do not
  depend on it), or ``s_k <= SENSITIVITY_RTOL * max_j s_j`` (``1e-6``: to move the fit as a
  1 % change of the most visible parameter does, it would have to change ``10^4`` times its
  size), is warned, naming the parameter and the compared outputs.  Least-squares problems
  only (other costs have no residuals; :func:`movement_notices` covers them at the end).
* **No movement** (:func:`movement_notices`): a parameter that ends exactly at its start,
  not on a bound, and whose standard error is not available from a non-singular Fisher
  information, was not fitted: the cost does not depend on it (zero gradient: it is not in
  the dependence of the compared outputs) or is flat in it at the start.  The result is
  marked untrusted.
* **A parameter at a bound** (:func:`bound_notices`): a parameter within ``BOUND_RTOL``
  (``1e-6``) of a bound, relative to the bound's magnitude (to the width of the bounds for a
  bound at 0): the minimum of the cost may lie beyond the bound, or the model needs a value
  outside the physical range to explain the data.  A warning naming the parameter, the
  bound and its value; the standard errors (which assume an interior minimum) are only
  indicative.
* **A cost far above the noise floor** (:func:`cost_notices`): with residuals that are white
  noise of variance ``sigma_c**2`` per channel, the expected cost is the noise floor
  ``J_noise = 1/2 sum_i eta_i sum_c weight_c sigma_c**2 / scale_c**2``
  (:meth:`~fmi_adjoint.costs.LeastSquaresCost.noise_floor`: ``N sigma**2 / 2`` per channel
  of ``N`` evenly weighted samples), ``sigma_c`` estimated from the data themselves.  At the
  true parameters ``J / J_noise`` is about 1 (at most 1 + a few ``sqrt(2 / N)``).  A ratio
  above ``COST_WARNING_RATIO`` (10: a residual RMS 3.2 times the noise) is warned, naming the
  ratio and the likely causes (a wrong local minimum, a wrong model structure, wrong units
  or channel mapping, a time offset); above ``COST_UNTRUSTED_RATIO`` (100: a residual RMS ten
  times the noise, 99 % of the residual energy unexplained by the noise) the result is
  untrusted, provided the floor measures noise (:func:`noise_resolved`: every channel's
  pseudo-residuals correlated as white noise's).  On noise-free (synthetic) or coarsely
  sampled data the floor is the signal's curvature, an arbitrary small number: the ratio then
  only warns.
* **A channel whose best time shift is large** (:func:`lag_notices`, at the result): the lag
  ``tau`` that maximizes the normalized cross-correlation (Pearson's, over the overlap) of
  the model's response ``m`` and the data ``d``, ``d(t) ~ m(t - tau)``, on the samples' even
  grid, searched up to ``LAG_SEARCH_SHARE`` (25 %) of the record either way and refined by
  a parabola through the peak; of the peaks nearly as good as the best (a period of a
  periodic signal), the shortest.  Warned when all of these hold:

  - ``|tau|`` is at least ``LAG_SAMPLES`` (3) sample intervals (the estimate resolves a
    fraction of one on noisy data) and at least ``LAG_SHARE`` (0.2 %) of the record;
  - the shifted response resembles the data (correlation at least ``LAG_MIN_CORRELATION``,
    0.5) and leaves at most ``LAG_GAIN`` (half) of the variance unexplained at lag 0
    unexplained (noise is not explained by any shift);
  - the shift explains the data to the noise: the variance it leaves unexplained,
    ``(1 - rho**2) var(d)``, is at most ``COST_WARNING_RATIO`` (10) times the channel's
    noise variance estimated from the data (a fit that absorbed part of an offset, or the
    constant phase of a wrong stiffness under a harmonic excitation, leaves more: the cost
    guard names the time offset among its causes);
  - the record's first and second halves give the same lag within ``LAG_AGREEMENT`` (25 %)
    of it: a constant offset, not the phase drift of a wrong frequency (a wrong stiffness
    looks like a lag that grows along the record; the cost guard covers that fit).

  The data then lag (or lead) the model by a time offset the parameters cannot absorb.
  The fix: ``--time-shift tau`` (model files), or identify the sensor's delay
  (``--params <ch>.delay``).  Channels whose delay is identified are not checked.
"""

from __future__ import annotations

from .notice import GuardedTarget, GuardedOptions, Notice
from .data import check_data_start, check_data_end, data_notices
from .outcome import (BOUND_RTOL, COST_UNTRUSTED_RATIO, COST_WARNING_RATIO, MOVEMENT_TOLERANCE, SENSITIVITY_RTOL,
                      bound_notices, cost_notices, movement_notices, noise_resolved, sensitivity_notices)
from .lag import (LAG_AGREEMENT, LAG_GAIN, LAG_MIN_CORRELATION, LAG_SAMPLES, LAG_SEARCH_SHARE, LAG_SHARE, channel_lag,
                  lag_notices)

__all__ = ["BOUND_RTOL", "COST_UNTRUSTED_RATIO", "COST_WARNING_RATIO", "GuardedOptions", "GuardedTarget",
           "LAG_AGREEMENT", "LAG_GAIN", "LAG_MIN_CORRELATION", "LAG_SAMPLES", "LAG_SEARCH_SHARE", "LAG_SHARE",
           "MOVEMENT_TOLERANCE", "Notice", "SENSITIVITY_RTOL", "bound_notices", "channel_lag", "check_data_end",
           "check_data_start", "cost_notices", "data_notices", "lag_notices", "movement_notices", "noise_resolved",
           "sensitivity_notices"]
