"""TOML model files (fmi_adjoint.model_file): errors that name the problem, the bundled
examples, and table loads read from CSV files."""

from __future__ import annotations

import math
import textwrap

import numpy as np
import pytest

from fmi_adjoint.compiled import compile_model
from fmi_adjoint.errors import ExpressionError, ModelError
from fmi_adjoint.examples import example_names, example_path
from fmi_adjoint.integrate import HHT, GeneralizedAlpha, simulate
from fmi_adjoint.integrate.schemes import scheme_from_settings
from fmi_adjoint.model import SimulationSettings
from fmi_adjoint.model_file import load_model, parse_model
from tolerances import EXACT

# A valid single-mass model; the cases below change one thing each.
BASE = """\
[model]
name = "probe"
source = "test"

[simulation]
t_end = 1.0
step = 0.01
alpha = {alpha}

[parameters]
m = 1.0
k = {{ value = 2.0, unit = "N/m", bounds = [0.1, 10.0] }}

[[coordinates]]
name = "x"
mass = "m"
{coordinate_extra}
[[forces]]
type = "{force_type}"
name = "spring"
coordinates = ["x"]
stiffness = {stiffness}
{extra}
[[outputs]]
name = "y"
expression = "x"
"""


def model_text(**changes) -> str:
    fields = dict(alpha=-0.05, coordinate_extra="", force_type="linear_spring_damper", stiffness='"k"', extra="")
    fields.update(changes)
    return BASE.format(**fields)


def write(tmp_path, text: str, name: str = "model.toml"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def load_and_compile(path):
    return compile_model(load_model(path))


def line_number(text: str, fragment: str) -> int:
    for number, line in enumerate(text.splitlines(), start=1):
        if fragment in line:
            return number
    raise AssertionError(f"{fragment!r} not in the model text")


def test_base_model_is_valid(tmp_path):
    compiled = load_and_compile(write(tmp_path, model_text()))
    assert compiled.n == 1 and compiled.m == 0
    assert compiled.parameter_names[:2] == ("m", "k")
    model = compiled.model
    assert model.parameter("k").bounds == (0.1, 10.0)
    assert model.parameter("k").unit == "N/m"
    assert model.simulation.alpha == -0.05


# -- errors naming the problem -------------------------------------------------------------


def test_malformed_toml_names_the_file_and_line(tmp_path):
    text = model_text(extra='\n[[outputs]\nname = "z"\n')
    bad_line = next(k for k, line in enumerate(text.splitlines(), start=1) if line.strip() == "[[outputs]")
    path = write(tmp_path, text)
    with pytest.raises(ModelError) as info:
        load_model(path)
    message = str(info.value)
    assert "malformed TOML" in message
    assert str(path) in message
    assert f"line {bad_line}" in message


def test_malformed_toml_value_names_the_line():
    text = model_text(stiffness='"k')  # unterminated string
    with pytest.raises(ModelError, match=rf"malformed TOML.*line {line_number(text, 'stiffness')}"):
        parse_model(text, source="broken.toml")


def test_unknown_section_is_named_with_the_known_sections():
    text = model_text(extra="\n[solver]\nrtol = 1e-8\n")
    with pytest.raises(ModelError) as info:
        parse_model(text, source="m.toml")
    message = str(info.value)
    assert "unknown section(s) ['solver']" in message
    for section in ("coordinates", "forces", "outputs", "parameters", "simulation"):
        assert section in message


def test_unknown_key_in_a_coordinate_is_named_with_its_line():
    text = model_text(coordinate_extra='masss = 2.0\n')
    with pytest.raises(ModelError) as info:
        parse_model(text, source="m.toml")
    message = str(info.value)
    assert "coordinates[0]" in message
    assert "unknown key(s) ['masss']" in message
    assert f"line {line_number(text, '[[coordinates]]')}" in message
    assert "initial_position" in message  # the allowed keys are listed


def test_unknown_force_type_lists_the_known_types():
    text = model_text(force_type="spring")
    with pytest.raises(ModelError) as info:
        parse_model(text, source="m.toml")
    message = str(info.value)
    assert "unknown element type 'spring'" in message
    for known in ("linear_spring_damper", "load", "polynomial_spring_damper", "table_load"):
        assert known in message
    assert f"line {line_number(text, '[[forces]]')}" in message


def test_unknown_key_of_a_force_element_is_named():
    text = model_text(extra='free_lenght = 0.1\n')
    with pytest.raises(ModelError, match=r"unknown key\(s\) \['free_lenght'\].*linear_spring_damper"):
        parse_model(text, source="m.toml")


def test_unknown_parameter_in_an_expression_is_named(tmp_path):
    path = write(tmp_path, model_text(stiffness='"k_typo"'))
    with pytest.raises(ExpressionError) as info:
        load_and_compile(path)
    message = str(info.value)
    assert "unknown name 'k_typo'" in message
    assert "spring" in message and "stiffness" in message
    assert "Known names here: k, m" in message  # the parameters are listed


def test_forbidden_syntax_in_an_expression_is_rejected(tmp_path):
    path = write(tmp_path, model_text(stiffness="""'__import__("os").system("x")'"""))
    with pytest.raises(ExpressionError) as info:
        load_and_compile(path)
    message = str(info.value)
    assert "only plain function names may be called" in message
    assert "__import__" in message
    assert "spring" in message and "stiffness" in message


@pytest.mark.parametrize(
    "stiffness, fragment",
    [('"k_typo"', "unknown name 'k_typo'"), ("""'__import__("os").system("x")'""", "__import__")],
    ids=["unknown_name", "forbidden_syntax"],
)
def test_load_model_reports_expression_errors_with_the_file(tmp_path, stiffness, fragment):
    """load_model's docstring: 'ModelError for ... any invalid entry; the message names the
    file, the line where it can be located, and the fix'.  An invalid force expression is an
    invalid entry of the file, so load_model itself must reject it and name the file."""
    path = write(tmp_path, model_text(stiffness=stiffness))
    with pytest.raises(ModelError) as info:
        load_model(path)
    assert fragment in str(info.value)
    assert str(path) in str(info.value)


@pytest.mark.parametrize(
    "extra, fragment",
    [
        ('\n[[coordinates]]\nname = "x"\nmass = 1.0\n', "the name 'x' is used twice"),
        ('\n[[coordinates]]\nname = "k"\nmass = 1.0\n', "the name 'k' is used twice"),
        (
            '\n[[forces]]\ntype = "load"\nname = "spring"\ncoordinate = "x"\nexpression = "1"\n',
            "force element name(s) ['spring'] used more than once",
        ),
        (
            '\n[[constraints]]\nname = "c"\nexpression = "x"\n[[constraints]]\nname = "c"\nexpression = "x - 1"\n',
            "constraint name(s) ['c'] used more than once",
        ),
        ('\n[[outputs]]\nname = "y"\nexpression = "2*x"\n', "output name(s) ['y'] used more than once"),
    ],
    ids=["coordinate", "coordinate_vs_parameter", "force", "constraint", "output"],
)
def test_duplicate_names_are_rejected(tmp_path, extra, fragment):
    path = write(tmp_path, model_text(extra=extra))
    with pytest.raises(ModelError) as info:
        load_model(path)
    assert fragment in str(info.value)
    assert str(path) in str(info.value)


def test_duplicate_parameter_key_is_a_toml_error():
    text = model_text().replace("m = 1.0\n", "m = 1.0\nm = 2.0\n")
    with pytest.raises(ModelError, match=rf"malformed TOML.*line {line_number(text, 'm = 2.0')}"):
        parse_model(text, source="m.toml")


def test_missing_outputs_are_reported(tmp_path):
    text = model_text().split("[[outputs]]")[0]
    with pytest.raises(ModelError, match="no outputs; define at least one"):
        load_model(write(tmp_path, text))


def test_missing_coordinates_are_reported():
    text = model_text()
    start = text.index("[[coordinates]]")
    text = text[:start] + text[text.index("[[forces]]"):]
    text = text.split("[[forces]]")[0] + "[[outputs]]\nname = \"y\"\nexpression = \"1\"\n"
    with pytest.raises(ModelError, match="no coordinates"):
        parse_model(text, source="m.toml")


def test_missing_model_name_is_reported():
    text = model_text().replace('name = "probe"\n', "")
    with pytest.raises(ModelError, match=r"model.*missing key\(s\) \['name'\]"):
        parse_model(text, source="m.toml")


@pytest.mark.parametrize("alpha", [0.5, 0.01, -0.34, -1.0])
def test_alpha_outside_the_stable_range_is_rejected(alpha):
    with pytest.raises(ModelError, match=rf"simulation\.alpha = {alpha} is outside \[-1/3, 0\]"):
        parse_model(model_text(alpha=alpha), source="m.toml")


@pytest.mark.parametrize("alpha, fragment", [('"abc"', "unknown name 'abc'"), ("true", "expected a number")])
def test_alpha_that_is_not_a_number_is_rejected(alpha, fragment):
    with pytest.raises(ModelError, match=fragment):
        parse_model(model_text(alpha=alpha), source="m.toml")


def test_alpha_as_a_constant_expression_is_accepted():
    model = parse_model(model_text(alpha='"-1/3"'), source="m.toml")
    assert model.simulation.alpha == pytest.approx(-1.0 / 3.0, rel=EXACT)


def scheme_text(lines: str, **changes) -> str:
    """model_text with ``lines`` added to its [simulation] table."""
    text = model_text(**changes)
    assert text.count("step = 0.01\n") == 1
    return text.replace("step = 0.01\n", "step = 0.01\n" + lines)


def test_integrator_defaults_are_hht_and_rho_inf_0_8():
    """Without ``integrator`` and ``rho_inf`` a model runs HHT with its alpha; rho_inf keeps
    its default 0.8 for ``--integrator generalized_alpha``."""
    settings = parse_model(model_text(), source="m.toml").simulation
    assert (settings.integrator, settings.rho_inf) == ("hht", 0.8)
    assert (SimulationSettings().integrator, SimulationSettings().rho_inf) == ("hht", 0.8)
    assert scheme_from_settings(settings) == HHT(alpha=-0.05)
    assert scheme_from_settings(settings, integrator="generalized_alpha") == GeneralizedAlpha(rho_inf=0.8)


@pytest.mark.parametrize("rho_inf, value", [("0.8", 0.8), ('"4/5"', 0.8), ("0", 0.0), ("1", 1.0)])
def test_integrator_and_rho_inf_are_read(tmp_path, rho_inf, value):
    """``[simulation] integrator = "generalized_alpha"`` and ``rho_inf`` (a number or a constant
    expression, [0, 1] inclusive) become the model's scheme: its default run is the run with
    ``GeneralizedAlpha(rho_inf)`` (Arnold & Brüls 2007) bit for bit, not HHT's."""
    text = scheme_text(f'integrator = "generalized_alpha"\nrho_inf = {rho_inf}\n',
                       coordinate_extra="initial_position = 0.1\n")
    model = load_model(write(tmp_path, text))
    assert model.simulation.integrator == "generalized_alpha"
    assert model.simulation.rho_inf == pytest.approx(value, rel=EXACT, abs=EXACT)
    assert model.simulation.alpha == -0.05
    assert scheme_from_settings(model.simulation) == GeneralizedAlpha(rho_inf=model.simulation.rho_inf)
    compiled = compile_model(model)
    own = simulate(compiled)
    ga = simulate(compiled, solver=GeneralizedAlpha(rho_inf=model.simulation.rho_inf))
    hht = simulate(compiled, solver=HHT(alpha=-0.05))
    assert np.array_equal(own.outputs(), ga.outputs())
    assert not np.array_equal(own.outputs(), hht.outputs())


def test_the_model_s_newton_variant_is_its_default_and_the_command_line_s_overrides_it(tmp_path):
    """``[simulation] newton = "modified"`` makes modified Newton the model's default
    (``--newton full`` overrides it); without it full Newton runs.  The default run is the
    modified-Newton run bit for bit, and factors less often than the full-Newton run."""
    assert SimulationSettings().newton == "full"
    assert parse_model(model_text(), source="m.toml").simulation.newton == "full"
    text = scheme_text('newton = "modified"\n', coordinate_extra="initial_position = 0.1\n")
    model = load_model(write(tmp_path, text))
    assert model.simulation.newton == "modified"
    assert scheme_from_settings(model.simulation) == HHT(alpha=-0.05, reuse_jacobian=True)
    assert scheme_from_settings(model.simulation, newton="full") == HHT(alpha=-0.05)
    compiled = compile_model(model)
    own = simulate(compiled)
    modified = simulate(compiled, solver=HHT(alpha=-0.05, reuse_jacobian=True))
    full = simulate(compiled, solver=HHT(alpha=-0.05))
    assert np.array_equal(own.outputs(), modified.outputs())
    assert own.factorizations < full.factorizations


def test_an_explicit_hht_integrator_is_read():
    settings = parse_model(scheme_text('integrator = "hht"\nrho_inf = 0.3\n'), source="m.toml").simulation
    assert (settings.integrator, settings.rho_inf) == ("hht", 0.3)
    assert scheme_from_settings(settings) == HHT(alpha=-0.05)


@pytest.mark.parametrize("lines, fragment", [
    ('integrator = "rk4"', "simulation.integrator = 'rk4' is unknown; write \"hht\" or \"generalized_alpha\""),
    ('integrator = "HHT"', "simulation.integrator = 'HHT' is unknown"),
    ("integrator = 3", "(line 8), simulation.integrator: '3' is not an integrator; write \"hht\" or"),
    ('integrator = ["hht"]', "(line 8), simulation.integrator: \"['hht']\" is not an integrator; write \"hht\""),
    ("rho_inf = 2", "simulation.rho_inf = 2.0 is outside [0, 1]"),
    ("rho_inf = -0.1", "simulation.rho_inf = -0.1 is outside [0, 1]"),
    ('rho_inf = "abc"', "(line 8), simulation.rho_inf: unknown name 'abc'"),
    ("rho_inf = true", "(line 8), simulation.rho_inf: expected a number"),
    ("rho_inf = nan", "(line 8), simulation.rho_inf: the number nan is not finite"),
    ('newton = "quasi"', "simulation.newton = 'quasi' is unknown; write \"full\" or \"modified\""),
    ("newton = 1", "(line 8), simulation.newton: '1' is not a Newton variant; write \"full\" or \"modified\""),
])
def test_bad_integrator_or_rho_inf_is_named(lines, fragment):
    assert line_number(scheme_text(lines + "\n"), lines) == 8
    with pytest.raises(ModelError) as info:
        parse_model(scheme_text(lines + "\n"), source="m.toml")
    assert str(info.value).startswith("m.toml")
    assert fragment in str(info.value)


@pytest.mark.parametrize(
    "replacement, fragment",
    [
        ("bounds = [10.0, 0.1]", "not an interval"),
        ("bounds = [0.1]", "expected [lower, upper]"),
        ('bounds = ["-inf", "inf"]', None),
    ],
)
def test_parameter_bounds(replacement, fragment):
    text = model_text().replace("bounds = [0.1, 10.0]", replacement)
    if fragment is None:
        assert parse_model(text).parameter("k").bounds == (-math.inf, math.inf)
    else:
        with pytest.raises(ModelError) as info:
            parse_model(text, source="m.toml")
        assert fragment in str(info.value)


@pytest.mark.parametrize("name", ["t", "sin", "pi", "der", "lam", "1x", "class"])
def test_reserved_or_invalid_coordinate_names_are_rejected(name):
    text = model_text().replace('name = "x"\nmass', f'name = "{name}"\nmass')
    with pytest.raises(ModelError, match="name"):
        parse_model(text, source="m.toml")


def test_missing_file_and_non_utf8_file(tmp_path):
    with pytest.raises(ModelError, match="not found"):
        load_model(tmp_path / "nope.toml")
    path = tmp_path / "latin1.toml"
    path.write_bytes(model_text().replace('"test"', '"t\xe9st"').encode("latin-1"))
    with pytest.raises(ModelError, match="UTF-8"):
        load_model(path)


# -- bundled examples ----------------------------------------------------------------------

EXPECTED_EXAMPLES = {
    # name: (n coordinates, m constraints, some parameters, outputs)
    "sdof": (1, 0, {"m", "c", "d"}, ("x",)),
    "engine_mount": (4, 1, {"c_E1", "c_E2", "d_E", "d_H2", "m_H", "a", "b"}, ("a1", "x1", "lever_force")),
    "slider_crank": (3, 2, {"r", "l", "m_r", "m_s", "phi0", "omega0"},
                     ("xs", "slider_acc", "rod_force_x", "crank_speed")),
}


def test_the_three_examples_are_bundled():
    assert set(EXPECTED_EXAMPLES) <= set(example_names())


def test_unknown_example_lists_the_examples():
    with pytest.raises(ModelError) as info:
        example_path("no_such_model")
    for name in EXPECTED_EXAMPLES:
        assert name in str(info.value)


@pytest.mark.parametrize("name", sorted(EXPECTED_EXAMPLES))
def test_bundled_example_loads_and_compiles(name, compiled_example):
    n, m, params, outputs = EXPECTED_EXAMPLES[name]
    model = load_model(example_path(name))
    assert model.name == name
    assert model.source  # every example says where it comes from
    compiled = compiled_example(name)
    assert (compiled.n, compiled.m) == (n, m)
    assert params <= set(compiled.parameter_names)
    assert compiled.output_names == outputs
    assert np.all(np.isfinite(compiled.defaults))
    for par in model.parameters:
        lo, hi = par.bounds
        assert lo <= par.value <= hi, par.name


def test_example_expressions_evaluate_as_documented(compiled_example):
    sdof = compiled_example("sdof")
    assert sdof.model.simulation.t_end == pytest.approx(6 * math.pi, rel=EXACT)
    engine = compiled_example("engine_mount")
    assert engine.defaults[engine.parameter_index("omega0")] == pytest.approx(4 * math.pi, rel=EXACT)
    crank = compiled_example("slider_crank")
    assert crank.mass_depends_on_q


# -- table loads ---------------------------------------------------------------------------

# Piecewise-linear force table; knots at multiples of 1/8 s, exactly on the step grid below.
TABLE_T = np.array([0.0, 0.25, 0.5, 1.0, 1.25])
TABLE_F = np.array([0.0, 2.0, 2.0, -1.0, 0.5])
MASS, GAIN = 2.0, 1.5

TABLE_MODEL = """\
[model]
name = "table_mass"

[parameters]
m = {mass}
gain = {gain}

[[coordinates]]
name = "x"
mass = "m"

[[forces]]
type = "table_load"
name = "shaker"
coordinate = "x"
file = "{file}"
column = "F"
scale = "gain"

[[outputs]]
name = "x"
expression = "x"
"""


def write_table_model(tmp_path, file="force.csv", column_header="F"):
    rows = "\n".join(f"{float(t)!r},{float(f)!r},{-float(f)!r}" for t, f in zip(TABLE_T, TABLE_F))
    (tmp_path / "force.csv").write_text(f"time,{column_header},other\n{rows}\n", encoding="utf-8")
    return write(tmp_path, TABLE_MODEL.format(mass=MASS, gain=GAIN, file=file))


def table_force(t):
    """Piecewise-linear interpolation written out segment by segment, end values held."""
    t = np.atleast_1d(np.asarray(t, dtype=float))
    out = np.empty_like(t)
    for j, tj in enumerate(t):
        if tj <= TABLE_T[0]:
            out[j] = TABLE_F[0]
        elif tj >= TABLE_T[-1]:
            out[j] = TABLE_F[-1]
        else:
            k = np.searchsorted(TABLE_T, tj, side="right") - 1
            w = (tj - TABLE_T[k]) / (TABLE_T[k + 1] - TABLE_T[k])
            out[j] = (1 - w) * TABLE_F[k] + w * TABLE_F[k + 1]
    return GAIN * out


def test_table_load_gives_the_interpolated_generalized_force(tmp_path):
    compiled = load_and_compile(write_table_model(tmp_path))
    p = compiled.defaults
    t = np.linspace(-0.5, 2.0, 41)  # before, inside and after the table
    zeros = np.zeros((t.size, 1))
    Ma, F, C = compiled.residual_terms(zeros, zeros, zeros, np.zeros((t.size, 0)), t, p)
    # F = C_q^T lambda - Q with no constraints: F = -Q = -gain * table(t).
    np.testing.assert_allclose(-F[:, 0], table_force(t), rtol=EXACT, atol=EXACT)
    assert C.shape == (t.size, 0)
    np.testing.assert_array_equal(Ma, 0.0)


def test_table_load_scale_is_a_parameter(tmp_path):
    compiled = load_and_compile(write_table_model(tmp_path))
    p = compiled.parameter_vector({"gain": 2 * GAIN})
    t = np.array([0.375])
    zeros = np.zeros((1, 1))
    _, F, _ = compiled.residual_terms(zeros, zeros, zeros, np.zeros((1, 0)), t, p)
    assert -F[0, 0] == pytest.approx(2 * table_force(t)[0], rel=EXACT)
    # dF/dgain = -table(t)
    _, F_p, _ = compiled.parameter_terms(zeros, zeros, zeros, np.zeros((1, 0)), t, p)
    assert F_p[0, 0, compiled.parameter_index("gain")] == pytest.approx(-table_force(t)[0] / GAIN, rel=EXACT)


def exact_motion(t):
    """x, v of m x'' = gain F(t), x(0) = v(0) = 0, integrated analytically segment by segment."""
    knots = np.append(TABLE_T, np.inf)
    acc = np.append(TABLE_F, TABLE_F[-1]) * GAIN / MASS
    x = np.zeros_like(t)
    v = np.zeros_like(t)
    xk = vk = 0.0
    for k in range(len(knots) - 1):
        lo, hi = knots[k], knots[k + 1]
        slope = 0.0 if math.isinf(hi) else (acc[k + 1] - acc[k]) / (hi - lo)
        inside = (t >= lo) & (t <= hi)
        tau = t[inside] - lo
        v[inside] = vk + acc[k] * tau + slope * tau**2 / 2
        x[inside] = xk + vk * tau + acc[k] * tau**2 / 2 + slope * tau**3 / 6
        if not math.isinf(hi):
            tau = hi - lo
            xk, vk = xk + vk * tau + acc[k] * tau**2 / 2 + slope * tau**3 / 6, vk + acc[k] * tau + slope * tau**2 / 2
    return x, v


def test_mass_driven_by_a_table_load_follows_the_analytic_integral(tmp_path):
    """With alpha = 0 (trapezoidal Newmark) and the table knots on the step grid, the
    velocity is the exact integral of the piecewise-linear acceleration, and the position
    carries the known Newmark defect h^2/12 (a(t) - a(0)) (the rule integrates
    int (t_i - s) a(s) ds with weights h^2/4, h^2/4 instead of h^2/3, h^2/6)."""
    compiled = load_and_compile(write_table_model(tmp_path))
    h = 2.0**-6
    traj = simulate(compiled, t_end=1.25, step=h, solver=HHT(alpha=0.0))
    x_exact, v_exact = exact_motion(traj.t)
    a_exact = table_force(traj.t) / MASS
    np.testing.assert_allclose(traj.a[:, 0], a_exact, rtol=0, atol=EXACT * np.max(np.abs(a_exact)))
    np.testing.assert_allclose(traj.v[:, 0], v_exact, rtol=0, atol=EXACT * np.max(np.abs(v_exact)))
    defect = h**2 / 12 * (a_exact - a_exact[0])
    np.testing.assert_allclose(traj.q[:, 0], x_exact + defect, rtol=0, atol=EXACT * np.max(np.abs(x_exact)))
    # The defect is not negligible, so the check above can tell the two apart.
    assert np.max(np.abs(defect)) > 1e3 * EXACT * np.max(np.abs(x_exact))


def test_simulating_beyond_the_table_is_refused(tmp_path):
    compiled = load_and_compile(write_table_model(tmp_path))
    with pytest.raises(ModelError, match=r"covers \[0, 1.25\] s.*extend the table"):
        simulate(compiled, t_end=1.5, step=2.0**-6)


def test_table_load_with_an_unknown_column_names_it(tmp_path):
    path = write_table_model(tmp_path, column_header="G")
    with pytest.raises(ModelError) as info:
        load_model(path)
    assert "'F'" in str(info.value)
    assert "forces[0]" in str(info.value)


def test_table_load_with_a_missing_file_names_it(tmp_path):
    path = write_table_model(tmp_path, file="missing.csv")
    with pytest.raises(ModelError, match="missing.csv"):
        load_model(path)


def test_table_load_needs_file_and_column():
    text = textwrap.dedent(
        """\
        [model]
        name = "t"
        [[coordinates]]
        name = "x"
        mass = 1.0
        [[forces]]
        type = "table_load"
        name = "shaker"
        coordinate = "x"
        [[outputs]]
        name = "x"
        expression = "x"
        """
    )
    with pytest.raises(ModelError, match="needs 'file'"):
        parse_model(text, source="m.toml")
