"""Every FMU variable type, and Co-Simulation grids that never fail on round-off.

* :mod:`fmi_adjoint.fmu.variables` on hand-made model descriptions: kinds of FMI 2
  (Integer, Boolean, Enumeration, String) and FMI 3 (Float32, Int32, UInt8) variables,
  arrays with literal and structural-parameter dimensions, ``resolve`` of ``A[i,j]``
  (1-based, row-major) and ``check_names`` with its messages;
* typed get/set through the worker process against a real FMU (``van_der_pol_me3``;
  ``stair`` and ``state_space3`` of ``fmus/`` when present);
* an FMU exported by fmi-adjoint identified from CSV data written by ``simulate``, whose
  times are multiples of the FMU's step only up to round-off: the finite-difference path
  succeeds on FMI 2 and 3 and equals the adjoint path's gradient; the runtime accepts
  communication points that drift by round-off and keeps refusing genuinely off-grid steps.
"""

from __future__ import annotations

import dataclasses
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

from fmi_adjoint.cli.fmu_loading import load_fmu_experiments
from fmi_adjoint.fmu.loading import fmu_fixed_step, fmu_target, grid_end
from fmi_adjoint.fmu.archive import FmuError, open_fmu
from fmi_adjoint.fmu.session import FmuSession
from fmi_adjoint.fmu.variables import VariableRef, check_names, numeric_names, resolve
from fmi_adjoint.identify.data_costs import CostOptions
from fmi_adjoint.toolchain import c_compiler
from handwritten_fmus import FMUS_DIR, build_fmu
from test_cli import gradient_json, run
from tolerances import EXACT, FMU_GRADIENT_VS_FD

# ------------------------------------------------------------ hand-made descriptions --

FMI2_XML = """<?xml version="1.0" encoding="UTF-8"?>
<fmiModelDescription fmiVersion="2.0" modelName="kinds2" guid="{11111111-2222-3333-4444-555555555555}">
  <CoSimulation modelIdentifier="kinds2"/>
  <TypeDefinitions>
    <SimpleType name="Gear"><Enumeration><Item name="low" value="1"/><Item name="high" value="2"/></Enumeration>
    </SimpleType>
  </TypeDefinitions>
  <ModelVariables>
    <ScalarVariable name="y" valueReference="0" causality="output"><Real/></ScalarVariable>
    <ScalarVariable name="n" valueReference="1" causality="output" variability="discrete"><Integer/>
    </ScalarVariable>
    <ScalarVariable name="b" valueReference="2" causality="output" variability="discrete"><Boolean/>
    </ScalarVariable>
    <ScalarVariable name="gear" valueReference="3" causality="output" variability="discrete">
      <Enumeration declaredType="Gear"/></ScalarVariable>
    <ScalarVariable name="c" valueReference="4" causality="parameter" variability="tunable"><Real start="2.5"/>
    </ScalarVariable>
    <ScalarVariable name="k" valueReference="5" causality="parameter" variability="fixed"><Integer start="3"/>
    </ScalarVariable>
    <ScalarVariable name="on" valueReference="6" causality="parameter" variability="fixed"><Boolean start="true"/>
    </ScalarVariable>
    <ScalarVariable name="label" valueReference="7" causality="parameter" variability="fixed">
      <String start="x"/></ScalarVariable>
    <ScalarVariable name="u" valueReference="8" causality="input" variability="discrete"><Integer start="0"/>
    </ScalarVariable>
    <ScalarVariable name="x[1]" valueReference="9" causality="output"><Real/></ScalarVariable>
  </ModelVariables>
  <ModelStructure>
    <Outputs><Unknown index="1"/><Unknown index="2"/><Unknown index="3"/><Unknown index="4"/>
      <Unknown index="10"/></Outputs>
  </ModelStructure>
</fmiModelDescription>
"""

FMI3_XML = """<?xml version="1.0" encoding="UTF-8"?>
<fmiModelDescription fmiVersion="3.0" modelName="kinds3" instantiationToken="{aaaaaaaa-2222-3333-4444-555555555555}">
  <CoSimulation modelIdentifier="kinds3"/>
  <ModelVariables>
    <Float64 name="time" valueReference="0" causality="independent" variability="continuous"/>
    <UInt64 name="n" valueReference="1" causality="structuralParameter" variability="fixed" start="2"/>
    <Float64 name="A" valueReference="2" causality="parameter" variability="tunable" start="1 2 3 4">
      <Dimension valueReference="1"/><Dimension valueReference="1"/></Float64>
    <Float64 name="y" valueReference="3" causality="output"><Dimension start="3"/></Float64>
    <Float32 name="f" valueReference="4" causality="output"/>
    <Int32 name="i" valueReference="5" causality="output" variability="discrete"/>
    <UInt8 name="w" valueReference="6" causality="output" variability="discrete"/>
    <Float32 name="g" valueReference="7" causality="parameter" variability="tunable" start="0.5"/>
    <UInt8 name="m" valueReference="8" causality="parameter" variability="fixed" start="7"/>
    <Float64 name="B" valueReference="9" causality="parameter" variability="fixed" start="1 2 3 4 5 6">
      <Dimension start="2"/><Dimension start="3"/></Float64>
  </ModelVariables>
  <ModelStructure>
    <Output valueReference="3"/><Output valueReference="4"/><Output valueReference="5"/>
    <Output valueReference="6"/>
  </ModelStructure>
</fmiModelDescription>
"""


def _fmu(folder: Path, name: str, xml: str) -> Path:
    """A zip with the model description and an (unloadable) binary: enough for open_fmu."""
    platform = "x86_64-linux" if 'fmiVersion="3.0"' in xml else "linux64"
    path = folder / f"{name}.fmu"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("modelDescription.xml", xml)
        archive.writestr(f"binaries/{platform}/{name}.so", b"not a binary")
    return path


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("variable_types")


@pytest.fixture(scope="module")
def fmi2(work):
    with open_fmu(_fmu(work, "kinds2", FMI2_XML)) as archive:
        yield archive


@pytest.fixture(scope="module")
def fmi3(work):
    with open_fmu(_fmu(work, "kinds3", FMI3_XML)) as archive:
        yield archive


@dataclasses.dataclass(frozen=True)
class _Cost:
    channels: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class _Inputs:
    columns: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class _Experiment:
    """What check_names reads of an FmuExperiment."""

    channels: tuple[str, ...] = ()
    values: dict = dataclasses.field(default_factory=dict)
    input_columns: tuple[str, ...] | None = None
    name: str = "run"

    @property
    def cost(self) -> _Cost:
        return _Cost(self.channels)

    @property
    def inputs(self) -> _Inputs | None:
        return None if self.input_columns is None else _Inputs(self.input_columns)


def test_fmi2_kinds_and_starts(fmi2):
    kinds = {name: v.kind for name, v in fmi2.variables.items()}
    assert kinds == {"y": "float64", "n": "int32", "b": "boolean", "gear": "enumeration", "c": "float64",
                     "k": "int32", "on": "boolean", "label": "string", "u": "int32", "x[1]": "float64"}
    assert fmi2.variables["on"].start == 1.0 and fmi2.variables["k"].start == 3.0
    assert fmi2.variables["label"].start is None
    assert numeric_names(fmi2, "output") == ["y", "n", "b", "gear", "x[1]"]
    assert fmu_target(fmi2).output_names == ("y", "n", "b", "gear", "x[1]")


def test_fmi3_kinds_shapes_and_starts(fmi3):
    v = fmi3.variables
    assert (v["f"].kind, v["i"].kind, v["w"].kind, v["m"].kind) == ("float32", "int32", "uint8", "uint8")
    assert v["A"].shape == (2, 2) and v["A"].start_values == (1.0, 2.0, 3.0, 4.0) and v["A"].start is None
    assert v["y"].shape == (3,) and v["B"].shape == (2, 3)
    assert v["g"].is_real and not v["A"].is_real and not v["m"].is_real
    assert numeric_names(fmi3, "output") == ["y[1]", "y[2]", "y[3]", "f", "i", "w"]
    assert numeric_names(fmi3, "parameter")[:5] == ["A[1,1]", "A[1,2]", "A[2,1]", "A[2,2]", "g"]


def test_resolve_elements_row_major_one_based(fmi3):
    assert resolve(fmi3, "A[1,2]") == VariableRef("A[1,2]", 2, "float64", element=1, size=4)
    assert resolve(fmi3, "A[2,1]").element == 2
    assert resolve(fmi3, "B[2,1]").element == 3 and resolve(fmi3, "B[1,3]").element == 2
    assert resolve(fmi3, "y[3]").wire() == ("float64", 3, 2, 3)
    assert resolve(fmi3, "f").wire() == ("float32", 4, None, 1)
    assert resolve(fmi3, "w").wire() == ("uint8", 6, None, 1)


def test_resolve_keeps_plain_int_for_float64_scalars(fmi2):
    assert resolve(fmi2, "c").wire() == 4
    assert resolve(fmi2, "x[1]").wire() == 9  # an FMI 2 scalar whose name has brackets
    assert resolve(fmi2, "n").wire() == ("int32", 1, None, 1)
    assert resolve(fmi2, "gear").wire() == ("enumeration", 3, None, 1)


@pytest.mark.parametrize("name, message", [
    ("A", "parameter 'A' is a 2x2 array: address one element as A[i,j] with i,j in 1..2"),
    ("A[3,1]", "'A[3,1]' is not an element of parameter 'A', a 2x2 array: address one element as A[i,j] with "
               "i,j in 1..2"),
    ("A[1]", "a 2x2 array"),
    ("B", "a 2x3 array: address one element as B[i,j] with i in 1..2, j in 1..3"),
    ("f[1]", "output 'f' is a scalar, not an array: address it as f"),
    ("nothing", "no variable named 'nothing'"),
])
def test_resolve_errors_name_the_dimensions_and_the_fix(fmi3, name, message):
    with pytest.raises(FmuError, match=None) as info:
        resolve(fmi3, name)
    assert message in str(info.value)


def test_strings_are_refused_by_name(fmi2):
    with pytest.raises(FmuError) as info:
        resolve(fmi2, "label")
    assert "parameter 'label' is a String; only numeric variables" in str(info.value)


def test_check_names_accepts_every_numeric_output_and_input(fmi2, fmi3):
    check_names(fmi2, ["c"], [_Experiment(("y", "n", "b", "gear", "x[1]"), {"k": 4, "on": 0, "c": 1.0}, ("u",))])
    check_names(fmi3, ["A[2,2]", "g"], [_Experiment(("y[1]", "f", "i", "w"), {"m": 255, "B[2,3]": 0.5})])


@pytest.mark.parametrize("names, experiment, message", [
    (["k"], _Experiment(), "'k' is an Integer parameter; only real parameters can be identified — fix it with "
                           "--set k=VALUE instead"),
    (["on"], _Experiment(), "'on' is a Boolean parameter; only real parameters"),
    (["label"], _Experiment(), "parameter 'label' is a String"),
    (["zz"], _Experiment(), "no real parameter named 'zz'. Parameters: c."),
    ([], _Experiment(("nope",)), "data column 'nope' of 'run' matches no output of kinds2.fmu. Outputs: y, n, b, "
                                 "gear, x[1]. Rename or drop the column."),
    ([], _Experiment((), {"k": 2.5}), "--set k=2.5: 'k' is an Integer parameter; give a whole number"),
    ([], _Experiment((), {"on": 2}), "(0 = false, 1 = true)"),
    ([], _Experiment((), {"y": 1.0}), "'y' is not a parameter of kinds2.fmu"),
    ([], _Experiment((), {}, ("n",)), "input column 'n' of 'run' matches no input of kinds2.fmu. Inputs: u."),
])
def test_check_names_errors(fmi2, names, experiment, message):
    with pytest.raises(FmuError) as info:
        check_names(fmi2, names, [experiment])
    assert message in str(info.value)


def test_check_names_fmi3_arrays_and_ranges(fmi3):
    with pytest.raises(FmuError, match=r"'m' is an UInt8 parameter; only real"):
        check_names(fmi3, ["m"], [])
    with pytest.raises(FmuError, match=r"give a whole number in \[0, 255\]"):
        check_names(fmi3, [], [_Experiment((), {"m": 256})])
    with pytest.raises(FmuError,
                       match=r"'y' is an array of 3 elements: address one element as y\[i\] with i in 1\.\.3"):
        check_names(fmi3, [], [_Experiment(("y",))])
    with pytest.raises(FmuError, match=r"Outputs: y\[1\], y\[2\], y\[3\], f, i, w\."):
        check_names(fmi3, [], [_Experiment(("q",))])


@pytest.mark.parametrize("dimension, problem", [
    ('<Dimension valueReference="42"/>', "refers to valueReference 42, which no variable has"),
    ('<Dimension valueReference="4"/>', "refers to 'f' (valueReference 4), which is not an integer variable"),
    ('<Dimension valueReference="8"/>', "which is neither a structural parameter nor a constant"),
])
def test_unresolvable_dimensions_are_refused_by_name(work, dimension, problem):
    xml = FMI3_XML.replace('<Dimension start="3"/>', dimension)
    with pytest.raises(FmuError) as info:
        open_fmu(_fmu(work, "bad_dims", xml))
    assert "dimension 1 of the array variable 'y'" in str(info.value) and problem in str(info.value)


def test_grid_end_snaps_round_off_and_covers_the_rest():
    assert grid_end(0.9999999999999, 1e-4) == 10000 * 1e-4
    assert grid_end(1.00000000000001, 1e-4) == 10000 * 1e-4
    assert grid_end(0.00025, 1e-4) == 3 * 1e-4
    assert grid_end(1e-5, 1e-4) == 1e-4


# ------------------------------------------------------------- typed access, real FMUs --

needs_cc = pytest.mark.skipif(c_compiler() is None, reason="no C compiler: the FMUs cannot be built")


@needs_cc
def test_typed_get_set_through_the_worker(work):
    with open_fmu(build_fmu("van_der_pol_me3", work)) as archive:
        session = FmuSession(archive, "ModelExchange")
        try:
            session.start({"mu": 1.75}, {}, 0.0, 1.0)
            refs = session.refs(["mu", "x0_start", "x0"])
            assert all(isinstance(r, int) for r in refs)  # float64 scalars stay plain ints on the wire
            typed = [("float64", r, None, 1) for r in refs]
            assert np.array_equal(session.get_real(refs), session.get_real(typed))
            assert session.get_real(refs)[:2].tolist() == [1.75, 2.0]
            (u,) = session.refs(["u"])  # an input: settable in continuous-time mode
            session.set_real([("float64", u, None, 1)], [0.625])
            assert session.get_real([u]).tolist() == [0.625]
            with pytest.raises(FmuError, match="only numeric variables"):
                session.get_real([("string", refs[0], None, 1)])
        finally:
            session.close()


def _needs(name: str) -> None:
    if not (FMUS_DIR / name / "modelDescription.xml").is_file():
        pytest.skip(f"fmus/{name} is not in this tree (written separately); its typed reads are tested with it")


@needs_cc
def test_stair_integer_boolean_enumeration_outputs(work):
    _needs("stair")
    with open_fmu(build_fmu("stair", work)) as archive:
        kinds = {v.kind for v in archive.variables.values() if v.causality == "output"}
        assert {"int32", "boolean", "enumeration"} <= kinds
        names = numeric_names(archive, "output")
        interface = "CoSimulation" if archive.co_simulation else "ModelExchange"
        session = FmuSession(archive, interface)
        try:
            session.start({}, {}, 0.0, 1.0)
            values = session.get_real(session.refs(names))
            assert values.shape == (len(names),) and np.all(np.isfinite(values))
            for name, value in zip(names, values):
                if archive.variables[name].kind != "float64":
                    assert value == round(value), name
        finally:
            session.close()


@needs_cc
def test_state_space3_arrays_and_fmi3_types(work):
    _needs("state_space3")
    with open_fmu(build_fmu("state_space3", work)) as archive:
        arrays = [v for v in archive.variables.values() if v.shape]
        assert arrays
        kinds = {v.kind for v in archive.variables.values()}
        assert {"float32", "int32", "uint8"} <= kinds
        names = numeric_names(archive, "output") + numeric_names(archive, "parameter")
        interface = "CoSimulation" if archive.co_simulation else "ModelExchange"
        session = FmuSession(archive, interface)
        try:
            session.start({}, {}, 0.0, 1.0)
            values = session.get_real(session.refs(names))
            assert np.all(np.isfinite(values))
            for v in archive.variables.values():  # array parameters read back their start values
                if v.causality == "parameter" and v.shape and v.start_values is not None:
                    from fmi_adjoint.fmu.variables import element_names

                    got = session.get_real(session.refs(element_names(v)))
                    assert np.allclose(got, v.start_values, rtol=0, atol=0), v.name
        finally:
            session.close()


# ---------------------------------------------- Co-Simulation grids and round-off --

#: The model's own end time: 10000 steps, over which the old importer's step (the smallest
#: interval of the CSV times, 1e-4 off by 1e-12 relative) drifted off the FMU's grid by more
#: than the runtime tolerated, failing at the last communication step.
EM_T_END = 1.0
EM_PARAMS = "c_E1,d_E"


@pytest.fixture(scope="module")
def em_data(work) -> Path:
    """engine_mount away from its start values, written by ``simulate`` (times as text)."""
    from fmi_adjoint.cli.main import main

    path = work / "em.csv"
    assert main(["simulate", "engine_mount", "--set", "c_E1=1.1e5", "--t-end", str(EM_T_END), "-o", str(path)]) == 0
    return path


@pytest.fixture(scope="module")
def exported(work) -> dict[int, Path]:
    if c_compiler() is None:
        pytest.skip("no C compiler: FMUs cannot be exported")
    from fmi_adjoint.examples import example_path
    from fmi_adjoint.export import export_fmu

    return {v: export_fmu(example_path("engine_mount"), work / f"em{v}.fmu", fmi_version=v) for v in (2, 3)}


def test_data_times_are_multiples_only_up_to_round_off(em_data):
    from fmi_adjoint import read_csv

    steps = np.diff(read_csv(em_data).times)
    # What made the old importer fail: the smallest interval is not the FMU's step.
    assert steps.min() != 1e-4 and abs(steps.min() / 1e-4 - 1) < EXACT


@pytest.mark.parametrize("version", [2, 3])
def test_experiment_runs_on_the_fmu_grid(exported, em_data, version):
    with open_fmu(exported[version]) as archive:
        assert fmu_fixed_step(archive) == 1e-4
        (experiment,) = load_fmu_experiments(archive, [str(em_data)], {}, inputs_file=None, t_end=None, step=None,
                                             identified=EM_PARAMS.split(","), cost=CostOptions())
        grid = experiment.grid()
    assert experiment.step == 1e-4
    assert np.array_equal(grid, 1e-4 * np.arange(grid.size))  # every point a multiple of the FMU's step
    assert abs(grid[-1] - EM_T_END) <= EXACT


@pytest.mark.parametrize("version", [2, 3])
def test_fd_gradient_from_simulated_csv_equals_adjoint(exported, em_data, version, capsys):
    common = ["--fmu", exported[version], "--data", em_data, "--params", EM_PARAMS]
    fd = gradient_json([*common, "--gradient", "fd", "--workers", 1], capsys)
    adjoint = gradient_json([*common, "--gradient", "adjoint"], capsys)
    assert fd["method"] == "fd" and adjoint["method"] == "adjoint"
    assert abs(fd["cost"] - adjoint["cost"]) <= EXACT * abs(adjoint["cost"])
    for name in EM_PARAMS.split(","):
        assert adjoint["gradient"][name] != 0.0
        assert abs(fd["gradient"][name] - adjoint["gradient"][name]) <= FMU_GRADIENT_VS_FD * abs(
            adjoint["gradient"][name]), name


def test_runtime_accepts_round_off_and_off_grid_steps(exported):
    with open_fmu(exported[3]) as archive:
        session = FmuSession(archive, "CoSimulation")
        try:
            n = 500
            # Communication points that drift from the grid by round-off, as an importer's
            # multiples of a step parsed from text do (relative 1e-11: 5e-13 s at the end).
            drifting = 1e-4 * (1 + 1e-11) * np.arange(n + 1)
            exact = 1e-4 * np.arange(n + 1)
            got = session.run_cs({}, drifting, ["a1"])
            want = session.run_cs({}, exact, ["a1"])
            assert np.array_equal(got, want)  # exactly the FMU's own steps were taken
            # A last step that absorbs the accumulated remainder (time_grid's rule; 5e-9 off a
            # whole step, beyond the old check's 1e-9 of the step itself) is served too.
            absorbed = drifting.copy()
            absorbed[-1] = n * 1e-4
            assert np.array_equal(session.run_cs({}, absorbed, ["a1"]), want)
            # Off-grid communication steps (issue 30, part 3) are served in equal internal steps
            # near the FMU's own (tests/test_fmu_any_step.py checks their convergence).
            off_grid = session.run_cs({}, 1.5e-4 * np.arange(11), ["a1"])
            assert off_grid.shape[0] == 11 and np.all(np.isfinite(off_grid))
        finally:
            session.close()


def test_cli_runs_an_off_grid_step(exported, em_data, capsys):
    code, _, err = run(["gradient", "--fmu", exported[2], "--data", em_data, "--params", EM_PARAMS, "--gradient",
                        "fd", "--step", "1.5e-4", "--workers", 1], capsys)
    assert code == 0, err


# ------------------------------------------ value references per base type, one name each --

# kinds2 with an Integer parameter declared before the Real parameter 'c' and sharing its
# valueReference 4: legal in FMI 2, where references are unique per base type only.
SHARED_VR_XML = FMI2_XML.replace(
    '<ScalarVariable name="c" valueReference="4"',
    '<ScalarVariable name="level" valueReference="4" causality="parameter" variability="fixed">'
    '<Integer start="7"/></ScalarVariable>\n    <ScalarVariable name="c" valueReference="4"')


def _folder(work: Path, label: str) -> Path:
    """A folder of its own for a variant of a hand-made FMU (whose file name is fixed by its
    modelIdentifier)."""
    folder = work / label
    folder.mkdir(exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def shared_vr(work):
    with open_fmu(_fmu(_folder(work, "shared_vr"), "kinds2", SHARED_VR_XML)) as archive:
        yield archive


def test_real_and_integer_sharing_a_value_reference_stay_two_parameters(shared_vr):
    """FMI 2 value references are unique per base type: the identified Real c = 1.5 and the
    Integer 'level' (both valueReference 4) are both set, neither replaces the other, and c's
    declared start, bounds and nominal are c's, not those of the Integer."""
    from fmi_adjoint.fmu.problem import _declared
    from fmi_adjoint.fmu.session import start_values

    refs, values = start_values(shared_vr, {"c": 1.5}, {})
    pairs = dict(zip(map(str, refs), values))
    assert pairs["4"] == 1.5 and pairs[str(("int32", 4, None, 1))] == 7.0
    refs, values = start_values(shared_vr, {"level": 9}, {})
    pairs = dict(zip(map(str, refs), values))
    assert pairs["4"] == 2.5 and pairs[str(("int32", 4, None, 1))] == 9.0
    assert _declared(shared_vr, "c")[0] == 2.5


ALIAS_XML = FMI2_XML.replace(
    '<ScalarVariable name="u"',
    '<ScalarVariable name="c_alias" valueReference="4" causality="parameter" variability="tunable">'
    '<Real/></ScalarVariable>\n    <ScalarVariable name="u"')


@pytest.mark.parametrize("names, values, message", [
    (["c", "c_alias"], {}, "'c' and 'c_alias' are the same parameter (valueReference 4); identify it once: drop "
                           "'c_alias' from --params"),
    (["c"], {"c_alias": 2.0}, "--set c_alias: 'c_alias' is the identified parameter 'c' under another name"),
])
def test_two_names_of_one_parameter_are_refused(work, names, values, message):
    with open_fmu(_fmu(_folder(work, "alias2"), "kinds2", ALIAS_XML)) as archive:
        with pytest.raises(FmuError) as info:
            check_names(archive, names, [_Experiment((), values)])
    assert message in str(info.value)


@pytest.mark.parametrize("name, message", [
    ("A[1, 2]", "'A[1, 2]' is element A[1,2] of parameter 'A'; write it as A[1,2] (no spaces, no leading zeros)"),
    ("A[ 1,2]", "write it as A[1,2]"),
    ("A [1,2]", "write it as A[1,2]"),
    ("A[01,2]", "write it as A[1,2]"),
    ("A[\u0661,2]", "is not an element of parameter 'A', a 2x2 array: address one element as A[i,j]"),
    ("A[" + "1" * 5000 + ",1]", "is not an element of parameter 'A'"),
    ("A[+1,2]", "is not an element of parameter 'A'"),
])
def test_an_element_has_one_spelling(fmi3, name, message):
    """Aliases of an element (spaces, leading zeros) would be separate parameters: refused
    with the canonical name; non-ASCII digits and absurdly long indices are no index."""
    with pytest.raises(FmuError) as info:
        resolve(fmi3, name)
    assert message in str(info.value)
    assert len(str(info.value)) < 400
    with pytest.raises(FmuError):
        check_names(fmi3, ["A[1,2]"], [_Experiment((), {name: 1.0})])


# ------------------------------------------------------- apply / validate: every kind --


def _apply(argv, capsys) -> tuple[int, str]:
    code, out, err = run(["apply", *argv], capsys)
    assert out == ""
    return code, err


def _result_file(path: Path, parameters: dict, settings: dict | None = None, interface=None) -> Path:
    payload = {"parameters": parameters, "settings": settings or {}}
    if interface:
        payload["interface"] = interface
    path.write_text(json.dumps(payload), encoding="utf-8")
    return path


def test_apply_hands_back_array_elements_integers_and_booleans(work, tmp_path, capsys):
    """What `identify` accepts, `apply` hands back: an identified array element (the whole
    start list written with that element replaced), integer and Boolean --set values
    (written as integers, true/false; ssv:Integer / ssv:Boolean in the SSV)."""
    fmi3 = _fmu(_folder(work, "apply3"), "kinds3", FMI3_XML)
    result = _result_file(tmp_path / "r3.json", {"A[1,2]": 7.5}, {"m": 9, "B[2,3]": 0.25})
    out3, ssv3, ssp3 = tmp_path / "o3.fmu", tmp_path / "o3.ssv", tmp_path / "o3.ssp"
    code, err = _apply([result, "--fmu", fmi3, "-o", out3, "--ssv", ssv3, "--ssp", ssp3], capsys)
    assert code == 0, err
    with open_fmu(out3) as archive:
        assert archive.variables["A"].start_values == (1.0, 7.5, 3.0, 4.0)
        assert archive.variables["B"].start_values == (1.0, 2.0, 3.0, 4.0, 5.0, 0.25)
        assert archive.variables["m"].start == 9.0
    with zipfile.ZipFile(out3) as z:
        assert 'name="m" valueReference="8" causality="parameter" variability="fixed" start="9"' in \
            z.read("modelDescription.xml").decode()
    ssv = ssv3.read_text(encoding="utf-8")
    assert '<ssv:Parameter name="A[1,2]">' in ssv and '<ssv:Integer value="9"/>' in ssv
    fmi2 = _fmu(_folder(work, "apply2"), "kinds2", FMI2_XML)
    result = _result_file(tmp_path / "r2.json", {"c": 1.5}, {"k": 4, "on": 0})
    out2, ssv2 = tmp_path / "o2.fmu", tmp_path / "o2.ssv"
    code, err = _apply([result, "--fmu", fmi2, "-o", out2, "--ssv", ssv2], capsys)
    assert code == 0, err
    xml = zipfile.ZipFile(out2).read("modelDescription.xml").decode()
    assert '<Integer start="4"/>' in xml and '<Boolean start="false"/>' in xml
    assert '<Real start="1.5"/>' in xml
    ssv = ssv2.read_text(encoding="utf-8")
    assert '<ssv:Boolean value="false"/>' in ssv and '<ssv:Integer value="4"/>' in ssv


@pytest.mark.parametrize("case", ["spelling", "fraction", "string", "interface"])
def test_apply_refuses_what_it_cannot_hand_back(case, work, tmp_path, capsys):
    """One error line naming the fix, exit 2, nothing written."""
    fmu = _fmu(_folder(work, "refuse3"), "kinds3", FMI3_XML)
    parameters, settings, interface, words = {"g": 0.5}, {}, None, ()
    if case == "spelling":
        parameters, words = {"A[1, 2]": 1.0}, ("write it as A[1,2]",)
    elif case == "fraction":
        settings, words = {"m": 2.5}, ("'m' is an UInt8 parameter", "whole number in [0, 255]")
    elif case == "string":
        fmu = _fmu(_folder(work, "refuse2"), "kinds2", FMI2_XML)
        parameters, words = {"label": 1.0}, ("'label' is a String",)
    else:  # an interface the FMU does not have, from a RESULT.json of another FMU
        interface, words = "ModelExchange", ("records the interface 'ModelExchange'", "CoSimulation")
    result = _result_file(tmp_path / "r.json", parameters, settings, interface)
    before = sorted(p.name for p in tmp_path.iterdir())
    code, err = _apply([result, "--fmu", fmu, "-o", tmp_path / "o.fmu", "--ssp", tmp_path / "o.ssp"], capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("fmi-adjoint: error:"), err
    for word in words:
        assert word in lines[0], (word, lines[0])
    assert sorted(p.name for p in tmp_path.iterdir()) == before


@pytest.mark.parametrize("stop", ["INF", "NaN"])
def test_ssp_leaves_out_non_finite_default_times(stop, work, tmp_path, capsys):
    xml = FMI2_XML.replace("<ModelVariables>", f'<DefaultExperiment startTime="0.5" stopTime="{stop}"/>\n'
                                               "  <ModelVariables>")
    fmu = _fmu(_folder(work, f"stop_{stop}"), "kinds2", xml)
    result = _result_file(tmp_path / "r.json", {"c": 1.5})
    code, err = _apply([result, "--fmu", fmu, "--ssp", tmp_path / "o.ssp"], capsys)
    assert code == 0, err
    ssd = zipfile.ZipFile(tmp_path / "o.ssp").read("SystemStructure.ssd").decode()
    assert '<ssd:DefaultExperiment startTime="0.5"/>' in ssd


@needs_cc
def test_apply_and_validate_state_space3_integer_and_array_values(work, tmp_path, capsys):
    """FMI 3 end to end: an identified array element and a UInt8 --set value handed back as
    start values run in fmpy as the identified model; `validate` accepts the Int32 output."""
    _needs("state_space3")
    import fmpy

    fmu = build_fmu("state_space3", work)
    result = _result_file(tmp_path / "r.json", {"A[1,2]": 0.75}, {"mode": 1})
    applied = tmp_path / "applied.fmu"
    code, err = _apply([result, "--fmu", fmu, "-o", applied], capsys)
    assert code == 0, err
    with open_fmu(fmu) as archive:
        starts = list(archive.variables["A"].start_values)
    starts[1] = 0.75
    kwargs = dict(stop_time=1.0, output_interval=0.01, relative_tolerance=1e-10, output=["y64", "steps"])
    reference = fmpy.simulate_fmu(str(fmu), start_values={"A": starts, "mode": 1}, **kwargs)
    with open_fmu(applied) as archive:  # what an importer applies: the handed-back start values
        handed_starts = {"A": list(archive.variables["A"].start_values), "mode": int(archive.variables["mode"].start)}
    assert handed_starts == {"A": starts, "mode": 1}
    handed = fmpy.simulate_fmu(str(applied), start_values=handed_starts, **kwargs)
    assert np.array_equal(reference["y64"], handed["y64"])
    data = tmp_path / "data.csv"
    data.write_text("time,y64,steps\n" + "".join(f"{float(t)!r},{float(y)!r},{int(s)}\n" for t, y, s in
                                                  zip(reference["time"], reference["y64"], reference["steps"])))
    code, out, err = run(["validate", applied, "--data", data, "-o", tmp_path / "report"], capsys)
    assert code == 0, err
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    assert set(report["outputs"]) == {"y64", "steps"}
    assert report["outputs"]["y64"]["max_abs_error"] <= EXACT * np.max(np.abs(reference["y64"]))


def test_validate_picks_array_elements_from_fmpys_shaped_columns(fmi3, monkeypatch):
    """fmpy records an FMI 3 array output as one column of shape (time, n): `validate` of the
    column y[2] compares its second element; an Int32 output arrives as numbers."""
    import fmi_adjoint.fmu.validation as handback

    asked = {}

    class _FakeSession:
        def __init__(self, archive, interface, **options):
            pass

        def simulate_fmu(self, **options):
            asked.update(options)
            t = np.linspace(0.0, 1.0, 11)
            return {"time": t, "y": np.column_stack([t, 10 * t, 100 * t]), "i": np.round(5 * t)}

        def close(self):
            pass

    monkeypatch.setattr(handback, "FmuSession", _FakeSession)
    times = np.array([0.0, 0.25, 1.0])
    out = handback.simulate_with_fmpy(fmi3, times, ["y[2]", "i"], start_values={"A[1,2]": 7.5, "m": 9})
    assert np.array_equal(out, np.column_stack([10 * times, np.interp(times, np.linspace(0, 1, 11),
                                                                      np.round(5 * np.linspace(0, 1, 11)))]))
    assert asked["output"] == ["y", "i"]
    assert asked["start_values"]["A"] == [1.0, 7.5, 3.0, 4.0] and asked["start_values"]["m"] == 9
    assert isinstance(asked["start_values"]["m"], int)
