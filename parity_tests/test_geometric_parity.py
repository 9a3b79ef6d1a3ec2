"""torch_geometric utilities, layers and whole models vs the real PyG: the matrix defined once
in torch2jax_ops.parity.cases.geometric (also run by the parity report, sections "geometric"
and "models")."""
import pytest

from torch2jax_ops.parity import _suite as suite

UTILITIES = suite.cases("geometric")
MODELS = suite.cases("models")


def test_matrix_covers_every_utility_layer_and_model():
    assert {c.op for c in UTILITIES} >= {
        "degree", "softmax", "add_self_loops", "add_remaining_self_loops", "remove_self_loops",
        "gcn_norm", "to_dense_batch", "global_add_pool", "global_mean_pool", "global_max_pool"}
    assert {c.op for c in MODELS if not c.op.startswith("port-")} >= {
        "GCNConv", "GraphConv", "SAGEConv", "GINConv", "GINEConv", "GATConv",
        "GCN", "GraphSAGE", "GIN", "GAT"}
    assert len({c.op for c in MODELS if c.op.startswith("port-")}) >= 12  # user-style models
    for case in UTILITIES + MODELS:
        assert case.dtype in ("float32", "float64")
    assert {c.dtype for c in MODELS} == {"float32", "float64"}


@pytest.mark.parametrize("case", UTILITIES, ids=[c.id for c in UTILITIES])
def test_utilities_match_pyg(case):
    result = case.run()
    assert result.passed, str(result)
    assert result.leaves, "nothing was compared"


@pytest.mark.parametrize("case", MODELS, ids=[c.id for c in MODELS])
def test_layers_and_models_match_pyg_with_gradients_by_parameter_name(case):
    result = case.run()
    assert result.passed, str(result)
    names = [leaf.path for leaf in result.leaves]
    assert any(n.startswith("grad ") and "args" not in n for n in names), names  # parameters
    assert "grad args[0]" in names, names  # x
