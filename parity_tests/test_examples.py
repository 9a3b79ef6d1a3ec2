"""The scripts in examples/ run on small data, and PyG's and the port's loss curves agree.

Each example trains the PyG model and its ``from_torch`` port from the same
weights on the same batches (no dropout) for 30 steps. In float64 the curves
agree within rtol 1e-4 (in fact ~1e-12): the port computes what PyG computes.
In float32 they agree to rounding until a ReLU input within rounding of 0
lands on the other side of the kink in one run; Adam then amplifies the
different gradient, so float32 curves are held to 1e-5 on the first step and
2e-2 over the 30.
"""
import importlib.util
import pathlib
import sys

import numpy as np
import pytest
import torch_geometric.typing

from parity_tests import samplers

ROOT = pathlib.Path(__file__).resolve().parent.parent
SAMPLER = samplers.install()  # PyG's kernel, or a pure-torch one (parity_tests/samplers.py)


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"examples_{name}",
                                                  ROOT / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check_curves(curves: dict, steps: int) -> None:
    assert set(curves) == {"pyg", "jax"}
    assert len(curves["pyg"]) == len(curves["jax"]) == steps
    assert all(np.isfinite(curves["jax"]))
    np.testing.assert_allclose(curves["jax"], curves["pyg"], rtol=1e-4)


def check_float32(curves: dict, steps: int) -> None:
    assert len(curves["pyg"]) == len(curves["jax"]) == steps
    np.testing.assert_allclose(curves["jax"][0], curves["pyg"][0], rtol=1e-5)
    np.testing.assert_allclose(curves["jax"], curves["pyg"], rtol=2e-2)


GRAPH = dict(steps=30, num_graphs=200, avg_nodes=16, batch_size=32)
NODE = dict(steps=30, num_nodes=1000, batch_size=32, fanout=(5, 5))
needs_sampler = pytest.mark.skipif(not SAMPLER,
                                   reason="NeighborLoader samples with pyg-lib or torch-sparse")


def test_graph_classification_gin_curves_agree(capsys):
    curves = load("graph_classification").main(**GRAPH, float64=True)
    check_curves(curves, 30)
    np.testing.assert_allclose(curves["jax"], curves["pyg"], rtol=1e-9)  # the same computation
    out = capsys.readouterr().out
    assert "PyG loss" in out and "JAX loss" in out and out.count("\n") >= 31


def test_graph_classification_gin_float32_curves_agree_to_rounding():
    check_float32(load("graph_classification").main(**GRAPH, verbose=False), 30)


@needs_sampler
def test_node_classification_sage_with_neighbor_loader_curves_agree():
    curves = load("node_classification").main(**NODE, float64=True, verbose=False)
    check_curves(curves, 30)
    np.testing.assert_allclose(curves["jax"], curves["pyg"], rtol=1e-9)


@needs_sampler
def test_node_classification_float32_curves_agree_to_rounding():
    check_float32(load("node_classification").main(**NODE, verbose=False), 30)


HETERO = dict(steps=30, num_nodes=300, batch_size=32, fanout=(4, 4))


@needs_sampler
@pytest.mark.parametrize("model", ["heteroconv", "to_hetero"])
def test_hetero_training_curves_agree(model, monkeypatch):
    """HeteroConv(SAGEConv) / to_hetero(Sequential) on a NeighborLoader over a HeteroData.
    (PyG compiles a Sequential's forward from a template that imports the module creating
    it by its file's base name: the script's folder is on sys.path, as when it runs.)"""
    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    check_curves(load("hetero_training").main(**HETERO, model=model, float64=True,
                                              verbose=False), 30)


@needs_sampler
def test_hetero_training_float32_curves_agree_to_rounding():
    check_float32(load("hetero_training").main(**HETERO, verbose=False), 30)


@pytest.mark.parametrize("name, argv, expected", [
    ("graph_classification", ["--steps", "3", "--graphs", "40", "--nodes", "10",
                              "--batch-size", "8", "--float64"],
     dict(steps=3, num_graphs=40, avg_nodes=10, batch_size=8, float64=True)),
    ("node_classification", ["--steps", "4", "--nodes", "500", "--fanout", "3", "2"],
     dict(steps=4, num_nodes=500, fanout=(3, 2), float64=False)),
    ("hetero_training", ["--steps", "5", "--model", "to_hetero", "--nodes", "100",
                         "--fanout", "2", "2", "--float64"],
     dict(steps=5, model="to_hetero", num_nodes=100, fanout=(2, 2), float64=True)),
])
def test_examples_take_their_sizes_from_the_command_line(monkeypatch, name, argv, expected):
    example = load(name)
    seen = {}
    monkeypatch.setattr(example, "main", lambda **kwargs: seen.update(kwargs))
    monkeypatch.setattr(sys, "argv", [f"{name}.py", *argv])
    example.cli()
    assert {k: seen[k] for k in expected} == expected
