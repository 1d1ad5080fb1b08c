"""The model file's limits on the number of entries per section (issue 24, part 5).

The limits follow what the builder handles in bounded time and memory (the comment of
``fmi_adjoint.model_file._MAX_ENTRIES``): a 10 x 10 x 10 lattice of point masses (1 000 bodies,
2 801 forces) is accepted, a larger one is refused before any entry is read or lowered.  How
early is shown by counting calls (the body reader, the lowering), never by timing.
"""

from __future__ import annotations

import pytest

from fmi_adjoint import mbs
from fmi_adjoint import model_file
from fmi_adjoint.errors import ModelError
from fmi_adjoint.examples import chains
from fmi_adjoint.examples.families import lattice_size, lattice_toml
from fmi_adjoint.model_file import parse_model, parse_system


@pytest.fixture
def calls(monkeypatch):
    """Counts of the body reader and of the lowering while a file is read."""
    counts = {"bodies": 0, "lowering": 0}
    read_body, lower = model_file._Reader.mbs_body, mbs.MultibodySystem.to_model

    def counting_body(self, *args, **kwargs):
        counts["bodies"] += 1
        return read_body(self, *args, **kwargs)

    def counting_lower(self):
        counts["lowering"] += 1
        return lower(self)

    monkeypatch.setattr(model_file._Reader, "mbs_body", counting_body)
    monkeypatch.setattr(mbs.MultibodySystem, "to_model", counting_lower)
    return counts


def test_a_ten_by_ten_by_ten_lattice_is_within_the_limits(calls):
    system = parse_system(lattice_toml(10, 10, 10), source="<lattice>")
    assert len(system.bodies) == 1000 and len(system.forces) == 2801 and len(system.markers) == 1100
    assert calls == {"bodies": 1000, "lowering": 0}
    assert lattice_size(10, 10, 10)[0] == 5800


def test_a_larger_lattice_is_refused_before_any_entry_is_read(calls):
    text = lattice_toml(11, 10, 10)
    with pytest.raises(ModelError) as refused:
        parse_model(text, source="big.toml")
    message = str(refused.value)
    assert "bodies" in message and "1100 entries" in message and "the limit is 1000" in message
    assert "Split the model or reduce it" in message
    assert calls == {"bodies": 0, "lowering": 0}


def test_each_limit_is_checked_before_any_entry(calls):
    for section, limit in model_file._MAX_ENTRIES.items():
        entries = "".join(f"\n[[{section}]]\n" for _ in range(limit + 1)) if section not in (
            "parameters", "inputs") else f"\n[{section}]\n" + "".join(f"p{k} = 1.0\n" for k in range(limit + 1))
        text = '[model]\nname = "big"\n' + entries
        with pytest.raises(ModelError, match=f"{section}: {limit + 1} entries; the limit is {limit}"):
            parse_model(text, source="big.toml")
    assert calls == {"bodies": 0, "lowering": 0}


def test_the_chains_follow_the_coordinate_limit():
    assert chains.MAX_MASSES == model_file._MAX_ENTRIES["coordinates"]
    text = chains.chain_toml(chains.MAX_MASSES, "linear")
    assert text.count("[[coordinates]]") == model_file._MAX_ENTRIES["coordinates"]
