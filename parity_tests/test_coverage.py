"""The guide's PyG coverage table (migration_guide/layers.md) against the registry and the suite."""
import importlib
import re
from collections import Counter
from pathlib import Path

import pytest

from torch2jax_ops.nn import _registry
from torch2jax_ops.parity import _coverage
from torch2jax_ops.parity import _suite as suite

PAGE = Path(__file__).resolve().parent.parent / "migration_guide" / "layers.md"


@pytest.fixture(scope="module")
def rows():
    return _coverage.coverage_rows(Counter(c.op for c in suite.cases()))


def _page_rows() -> dict:
    text = PAGE.read_text()
    body = text.split("<!-- generated: coverage-table -->", 1)[1].split("<!-- end generated -->")[0]
    found = re.findall(r"^\| `(\w+)` \| (ported|not ported) \| (\d+) \|", body, flags=re.M)
    return {name: (status == "ported", int(n)) for name, status, n in found}


def test_page_lists_every_pyg_name_with_the_registry_status(rows):
    page = _page_rows()
    assert len(page) == len(rows) > 100
    for _, name, ported, n, _ in rows:
        assert page[name] == (ported, n), f"{name}: page says {page[name]}, registry {ported, n}"


def test_every_ported_name_has_parity_cases(rows):
    assert [name for _, name, ported, n, _ in rows if ported and n == 0] == []


def test_every_registered_pyg_converter_is_in_the_table(rows):
    """A converter for a public PyG class counts as ported in the table (no stale 'not ported')."""
    ported = {name for _, name, p, _, _ in rows if p}
    for package, module_name in _coverage.PACKAGES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            obj = getattr(module, name)
            if isinstance(obj, type) and _registry.class_path(obj) in _registry.converters():
                assert name in ported, name


def test_the_issue_list_is_ported(rows):
    """The layers the PyG-coverage issue asks for are ported (and so, by the test above, tested)."""
    wanted = {
        "GATv2Conv", "TransformerConv", "SGConv", "TAGConv", "ChebConv", "APPNP", "GCN2Conv",
        "ARMAConv", "AGNNConv", "MixHopConv", "FiLMConv", "DNAConv", "EdgeConv", "PNAConv",
        "RGCNConv", "FastRGCNConv", "GENConv", "ResGatedGraphConv", "GatedGraphConv", "NNConv",
        "CGConv", "LEConv", "ClusterGCNConv", "GeneralConv", "SuperGATConv", "PointNetConv",
        "SumAggregation", "MeanAggregation", "MaxAggregation", "MinAggregation",
        "MulAggregation", "VarAggregation", "StdAggregation", "SoftmaxAggregation",
        "PowerMeanAggregation", "MultiAggregation", "DegreeScalerAggregation",
        "AttentionalAggregation", "Set2Set", "BatchNorm", "LayerNorm", "GraphNorm",
        "InstanceNorm", "PairNorm", "MessageNorm", "TopKPooling", "SAGPooling",
    }
    ported = {name for _, name, p, _, _ in rows if p}
    assert sorted(wanted - ported) == []


def test_not_ported_names_say_why(rows):
    for _, name, ported, _, note in rows:
        assert ported or len(note) > 20, name
