"""The guide's torch.nn coverage table (migration_guide/torch_nn.md) against the registry and
the parity suite."""
import re
from collections import Counter
from pathlib import Path

import pytest
import torch.nn.modules as modules

from torch2jax_ops.nn import _registry
from torch2jax_ops.parity import _suite as suite
from torch2jax_ops.parity import _torch_nn_coverage as coverage

PAGE = Path(__file__).resolve().parent.parent / "migration_guide" / "torch_nn.md"
#: ported classes that are only containers (no forward of their own to compare)
CONTAINERS = {"ModuleList"}


@pytest.fixture(scope="module")
def rows():
    return coverage.torch_nn_rows(Counter(c.op for c in suite.cases()))


def test_page_lists_every_torch_nn_class_with_the_registry_status(rows):
    text = PAGE.read_text()
    body = text.split("<!-- generated: torch-nn-coverage-table -->", 1)[1]
    body = body.split("<!-- end generated -->")[0]
    found = re.findall(r"^\| `(\w+)` \| (ported|not ported) \| (\d+) \|", body, flags=re.M)
    page = {name: (status == "ported", int(n)) for name, status, n in found}
    assert set(page) == set(modules.__all__)
    for name, ported, n, _ in rows:
        assert page[name] == (ported, n), f"{name}: page says {page[name]}, registry {ported, n}"


def test_every_ported_class_has_parity_cases(rows):
    assert [name for name, ported, n, _ in rows if ported and n == 0
            and name not in CONTAINERS] == []


def test_every_unported_class_says_why(rows):
    for name, ported, _, note in rows:
        assert ported or note, name


def test_the_pyg_examples_layers_are_ported(rows):
    """The layers that stopped PyG's example models (the brief of this section)."""
    ported = {name for name, p, _, _ in rows if p}
    assert {"MultiheadAttention", "LSTM", "GRU", "GRUCell", "Conv1d", "MaxPool1d", "Conv2d",
            "PReLU", "RNN", "RNNCell", "LSTMCell"} <= ported


def test_a_registered_converter_counts_as_ported(rows):
    ported = {name for name, p, _, _ in rows if p}
    for name in modules.__all__:
        obj = getattr(modules, name)
        if isinstance(obj, type) and _registry.class_path(obj) in _registry.converters():
            assert name in ported, name
