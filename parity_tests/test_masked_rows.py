"""Boolean-mask rows (``x[mask]``) in traced forwards under ``jax.jit`` (torch2jax_ops.nn._masked).

UniMP-style label embeddings on masked rows (``x[mask] = x[mask] + emb(y[mask])``, the
``+=`` form of PyG's ``MaskLabel``, its concat form), losses and reductions over masked
rows: the same values and gradients as torch, eagerly and jitted (one compilation for
every mask of a shape), for a random, an all-False and an all-True mask. Uses that need
the masked rows as a tensor of their own raise under jit, naming the line.
"""
from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch_geometric.nn import MaskLabel

from torch2jax_ops import _dtypes, nn, to_jax
from torch2jax_ops.nn import _masked
from torch2jax_ops.parity import compare_modules

N, D, C = 12, 8, 3


class Assign(torch.nn.Module):
    """UniMP: a label embedding added on the training rows, written back."""

    def __init__(self):
        super().__init__()
        self.label_emb = torch.nn.Embedding(C, D)
        self.lin = torch.nn.Linear(D, C)

    def forward(self, x, y, mask):
        x = x.clone()
        x[mask] = x[mask] + self.label_emb(y[mask])
        return self.lin(x).relu()


class AddInPlace(torch.nn.Module):
    """PyG's MaskLabel (``x[mask] += self.emb(y[mask])``), traced through."""

    def __init__(self):
        super().__init__()
        self.label = MaskLabel(C, D)
        self.lin = torch.nn.Linear(D, C)

    def forward(self, x, y, mask):
        return torch.tanh(self.lin(self.label(x, y, mask)))


class Concat(torch.nn.Module):
    """MaskLabel's concat form: the label embedding written into zeros on the masked rows,
    concatenated to the features."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(C, D)
        self.lin = torch.nn.Linear(2 * D, C)

    def forward(self, x, y, mask):
        out = x.new_zeros(y.size(0), D)
        out[mask] = self.emb(y[mask])
        return self.lin(torch.cat([x, out], dim=-1))


class MaskedLoss(torch.nn.Module):
    def __init__(self, loss="cross_entropy", **options):
        super().__init__()
        self.lin = torch.nn.Linear(D, C)
        self.loss, self.options = loss, options

    def forward(self, x, y, mask):
        out = self.lin(x)
        if self.loss == "cross_entropy":
            return F.cross_entropy(out[mask], y[mask], **self.options)
        if self.loss == "nll_loss":
            return F.nll_loss(F.log_softmax(out[mask], dim=-1), y[mask], **self.options)
        if self.loss == "mse_loss":
            return F.mse_loss(out[mask], F.one_hot(y[mask], C).float(), **self.options)
        return F.binary_cross_entropy_with_logits(out[mask][:, 0], (y[mask] == 1).float(),
                                                  **self.options)


class Reduce(torch.nn.Module):
    def __init__(self, how):
        super().__init__()
        self.lin = torch.nn.Linear(D, C)
        self.how = how

    def forward(self, x, y, mask):
        h = F.gelu(self.lin(x)) * 2.0 + 1.0
        rows = h[mask]
        if self.how == "mean0":
            return rows.mean(0)
        if self.how == "mean":
            return torch.mean(rows)
        if self.how == "sum":
            return rows.sum() + h[mask, 1:].sum(dim=0).sum()
        if self.how == "max0":
            return rows.max(dim=0)
        if self.how == "max":
            return rows.max() + rows.amin(0).sum()
        if self.how == "norm":
            return rows.norm() + torch.linalg.vector_norm(rows, 1, dim=0).sum()
        if self.how == "rowwise":  # a feature-dim reduction keeps the rows, then written back
            out = torch.zeros_like(h[:, 0])
            out[mask] = F.softmax(rows, dim=-1).amax(-1) + rows.logsumexp(1)
            return out
        raise ValueError(self.how)


def _inputs(mask_kind: str, seed: int = 0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(N, D, generator=g, dtype=dtype)
    y = torch.randint(0, C, (N,), generator=g)
    if mask_kind == "random":
        mask = torch.rand(N, generator=g) > 0.5
        mask[:2] = torch.tensor([True, False])  # at least one row in and one out
    else:
        mask = torch.full((N,), mask_kind == "all", dtype=torch.bool)
    return x, y, mask


MODELS = {
    "assign": Assign,
    "masklabel_add": AddInPlace,
    "concat": Concat,
    "cross_entropy": MaskedLoss,
    "cross_entropy_sum_smoothed": lambda: MaskedLoss(reduction="sum", label_smoothing=0.1),
    "cross_entropy_weighted": lambda: MaskedLoss(weight=torch.tensor([0.5, 2.0, 1.0])),
    "nll_loss": lambda: MaskedLoss("nll_loss"),
    "mse_loss": lambda: MaskedLoss("mse_loss"),
    "bce_logits": lambda: MaskedLoss("bce"),
    "mean0": lambda: Reduce("mean0"),
    "mean": lambda: Reduce("mean"),
    "sum": lambda: Reduce("sum"),
    "max0": lambda: Reduce("max0"),
    "max": lambda: Reduce("max"),
    "norm": lambda: Reduce("norm"),
    "rowwise": lambda: Reduce("rowwise"),
}

#: torch raises for a max over zero rows (no value to give): the all-False mask is left out
_NO_EMPTY = {"max0", "max"}


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("mask_kind", ["random", "none", "all"])
@pytest.mark.parametrize("model", sorted(MODELS))
def test_masked_rows_match_torch(model, mask_kind, jit):
    if mask_kind == "none" and model in _NO_EMPTY:
        pytest.skip("torch raises: max over zero rows")
    torch.manual_seed(1)
    module = MODELS[model]()
    x, y, mask = _inputs(mask_kind)
    result = compare_modules(module, nn.from_torch(module), x, y, mask, jit=jit)
    assert result.passed, str(result)
    names = {leaf.path for leaf in result.leaves}
    assert "grad lin.weight" in names and "grad args[0]" in names
    if mask_kind == "none" and model in ("mean0", "mean", "cross_entropy", "nll_loss"):
        torch_out = module(x, y, mask)
        assert torch.isnan(torch_out).all()  # torch's mean over zero rows: NaN, matched


@pytest.mark.parametrize("model", ["assign", "cross_entropy", "mean0"])
def test_masked_rows_float64(model):
    torch.manual_seed(2)
    module = MODELS[model]().double()
    x, y, mask = _inputs("random", seed=3, dtype=torch.float64)
    with _dtypes.x64(True):
        result = compare_modules(module, nn.from_torch(module), x, y, mask, jit=True)
    assert result.passed, str(result)
    assert any(leaf.dtype == "float64" for leaf in result.leaves)


def test_one_compilation_serves_every_mask():
    """Two masks of one shape (different rows, different counts): one trace, torch's
    values and gradients for each."""
    torch.manual_seed(4)
    module = Assign()
    port = nn.from_torch(module)
    traces = []

    def loss(m, x, y, mask):
        traces.append(1)
        out = m(x, y, mask)
        return jnp.sum(out * jnp.arange(out.size, dtype=out.dtype).reshape(out.shape)), out

    step = eqx.filter_jit(eqx.filter_value_and_grad(loss, has_aux=True))
    x, y, _ = _inputs("random", seed=5)
    masks = [torch.arange(N) % 3 == 0, torch.arange(N) < 7]
    yj = to_jax(y, allow_downcast=True)  # int64 labels as int32 (64-bit mode off)
    for mask in masks:
        (value, out), grads = step(port, to_jax(x), yj, to_jax(mask))
        xt = x.clone().requires_grad_(True)
        torch_out = module(xt, y, mask)
        weights = torch.arange(torch_out.numel(), dtype=torch.float32).reshape(torch_out.shape)
        module.zero_grad()
        (torch_out * weights).sum().backward()
        np.testing.assert_allclose(np.asarray(out), torch_out.detach().numpy(), rtol=1e-5,
                                   atol=1e-6)
        np.testing.assert_allclose(np.asarray(grads["label_emb"].weight),
                                   module.label_emb.weight.grad.numpy(), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(np.asarray(grads["lin"].weight),
                                   module.lin.weight.grad.numpy(), rtol=1e-5, atol=1e-5)
    assert len(traces) == 1
    # the two masks gave different outputs (the mask is data, not a constant)
    a = port(to_jax(x), yj, to_jax(masks[0]))
    b = port(to_jax(x), yj, to_jax(masks[1]))
    assert not np.allclose(np.asarray(a), np.asarray(b))


def test_unselected_rows_give_no_nan_gradient():
    """log of the masked rows: the unselected rows hold negative numbers (log -> NaN), which
    torch never computes; the port computes on copies of a selected row instead."""

    class LogRows(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = torch.nn.Parameter(torch.tensor(1.5))

        def forward(self, x, mask):
            return torch.log(x[mask] * self.scale).sum()

    module = LogRows()
    x = torch.tensor([[1.0, 2.0], [-1.0, -3.0], [0.5, 4.0], [0.0, -2.0]])
    mask = torch.tensor([True, False, True, False])
    result = compare_modules(module, nn.from_torch(module), x, mask, jit=True)
    assert result.passed, str(result)


# ------------------------------------------------------------------------ what raises

class Returned(torch.nn.Module):
    def forward(self, x, mask):
        return x[mask] * 2


class SizeRead(torch.nn.Module):
    def forward(self, x, mask):
        rows = x[mask]
        return rows.sum() / rows.size(0)


class CatRows(torch.nn.Module):
    def forward(self, x, mask):
        return torch.cat([x[mask], x], dim=0).sum()


class TwoMasks(torch.nn.Module):
    def forward(self, x, mask):
        return (x[mask] + x[~mask]).sum()


class FullSize(torch.nn.Module):
    def forward(self, x, mask):
        return (x[mask] + x).sum()


class MaskOfMask(torch.nn.Module):
    def forward(self, x, mask):
        return x[mask][mask[: 2]].sum()


class OverRows(torch.nn.Module):
    def forward(self, x, mask):
        return F.softmax(x[mask], dim=0).sum()


@pytest.mark.parametrize("module, code, what", [
    (Returned(), "return x[mask] * 2", "returning the masked rows"),
    (SizeRead(), "return rows.sum() / rows.size(0)", r"number of masked rows"),
    (CatRows(), "torch.cat([x[mask], x], dim=0)", r"concatenating masked rows with other"),
    (TwoMasks(), "(x[mask] + x[~mask]).sum()", r"two different masks"),
    (FullSize(), "(x[mask] + x).sum()", r"tensor of shape \(6, 3\)"),
    (MaskOfMask(), "x[mask][mask[: 2]].sum()", r"indexing the masked rows"),
    (OverRows(), "F.softmax(x[mask], dim=0)", r"softmax over the rows"),
], ids=lambda v: type(v).__name__ if isinstance(v, torch.nn.Module) else None)
def test_other_uses_raise_under_jit_naming_the_line(module, code, what):
    x = torch.randn(6, 3)
    mask = torch.tensor([True, False, True, True, False, False])
    port = nn.from_torch(module)
    try:  # eagerly, torch's semantics (real boolean indexing) -- or torch's own error
        expected = module(x, mask)
    except Exception:  # noqa: BLE001 - e.g. the mask of another length
        expected = None
    if expected is not None:
        np.testing.assert_allclose(np.asarray(port(to_jax(x), to_jax(mask))),
                                   expected.numpy(), rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError) as info:
        jax.jit(lambda m, a, b: m(a, b))(port, to_jax(x), to_jax(mask))
    message = str(info.value)
    assert "boolean mask" in message and "test_masked_rows.py:" in message
    assert code in message
    assert "supported under jax.jit" in message and "x[mask] += v" in message
    import re
    assert re.search(what, message), message


def test_other_masks_keep_the_old_error():
    """A 2-d mask (elements, not rows) is not a row selection: the getitem error."""

    class Elements(torch.nn.Module):
        def forward(self, x, mask):
            return x[mask.unsqueeze(-1).expand_as(x)].sum()

    port = nn.from_torch(Elements())
    x, mask = jnp.ones((4, 2)), jnp.asarray([True, False, True, False])
    assert float(port(x, mask)) == 4.0
    with pytest.raises(ValueError, match=r"(?s)getitem: a boolean mask index.*supported under "
                                         r"jax\.jit.*test_masked_rows\.py:"):
        jax.jit(lambda m, a, b: m(a, b))(port, x, mask)


def test_masked_rows_are_never_a_plain_array():
    rows = _masked.select(jnp.arange(6.0).reshape(3, 2), jnp.asarray([True, False, True]))
    np.testing.assert_array_equal(np.asarray(rows.full), [[0, 1], [0, 1], [4, 5]])
    with pytest.raises(ValueError, match="as a plain array"):
        jnp.asarray(rows)
    with pytest.raises(ValueError):  # JAX refuses it too: never silently the full rows
        jnp.sum(rows)


def test_every_rule_names_a_table_entry():
    assert _masked.missing_rule_keys() == []


def test_cross_entropy_with_every_target_ignored_has_zero_gradient():
    """torch: the loss is NaN (0 / 0) and the gradient 0; the port gave NaN gradients
    (1 / sum(w) = inf times the zero weight of an ignored target)."""
    class AllIgnored(torch.nn.Module):
        def __init__(self, loss):
            super().__init__()
            self.lin = torch.nn.Linear(D, C)
            self.loss = loss

        def forward(self, x, y):
            out = self.lin(x)
            if self.loss == "nll_loss":
                out = F.log_softmax(out, -1)
            return getattr(F, self.loss)(out, y, ignore_index=1)

    for loss in ("cross_entropy", "nll_loss"):
        torch.manual_seed(6)
        module = AllIgnored(loss)
        x, y = torch.randn(5, D), torch.ones(5, dtype=torch.long)
        result = compare_modules(module, nn.from_torch(module), x, y, jit=False)
        assert result.passed, str(result)
        module(x, y).backward()
        assert torch.all(module.lin.weight.grad == 0)


class NonzeroRows(torch.nn.Module):
    def forward(self, mask):
        return mask.nonzero()


class OneHot(torch.nn.Module):
    def forward(self, y):
        return F.one_hot(y)


def test_nonzero_and_one_hot_name_the_fix_under_jit():
    mask = jnp.asarray([True, False, True])
    port = nn.from_torch(NonzeroRows())
    np.testing.assert_array_equal(np.asarray(port(mask)), [[0], [2]])
    with pytest.raises(ValueError, match=r"nonzero.*three-argument torch\.where.*keep the "
                                         r"shape"):
        jax.jit(lambda m, a: m(a))(port, mask)
    port = nn.from_torch(OneHot())
    y = jnp.asarray([0, 2])
    np.testing.assert_array_equal(np.asarray(port(y)), [[1, 0, 0], [0, 0, 1]])
    with pytest.raises(ValueError, match=r"one_hot: `num_classes`.*num_classes="):
        jax.jit(lambda m, a: m(a))(port, y)


def _two_graphs():
    torch.manual_seed(0)
    x = torch.randn(7, 8)
    edge_index = torch.tensor([[0, 1, 2, 3, 4, 5, 6, 4], [1, 2, 0, 4, 5, 6, 3, 6]])
    batch = torch.tensor([0, 0, 0, 1, 1, 1, 1])
    return x, edge_index, batch


def test_gpsconv_takes_the_dense_rows_back_under_jit():
    """PyG's GPSConv: h, mask = to_dense_batch(x, batch); attention; h[mask]. The mask holds
    every node, so h[mask] has N rows: a static shape (graph_gps.py)."""
    from torch_geometric.nn import GINConv, GPSConv

    x, edge_index, batch = _two_graphs()
    model = GPSConv(8, GINConv(torch.nn.Linear(8, 8)), heads=2, dropout=0.0).eval()
    port = nn.from_torch(model)
    for jit in (True, False):
        result = compare_modules(model, port, x, edge_index, batch, jit=jit)
        assert result.passed, result


class _DenseRows(torch.nn.Module):
    def __init__(self, max_num_nodes=None):
        super().__init__()
        self.lin = torch.nn.Linear(8, 3)
        self.max_num_nodes = max_num_nodes

    def forward(self, x, batch):
        from torch_geometric.utils import to_dense_batch

        h, mask = to_dense_batch(self.lin(x), batch, max_num_nodes=self.max_num_nodes)
        h = h - h.sum(dim=1, keepdim=True)      # a per-graph op on the dense batch
        return h[mask] * 2.0


def test_rows_of_a_dense_mask_come_back_in_node_order():
    x, _, batch = _two_graphs()
    model = _DenseRows()
    result = compare_modules(model, nn.from_torch(model), x, batch)
    assert result.passed, result
    # the rule guarded: row i of the output is node i (compare_modules' rows would differ
    # for a permuted or padded selection); with a BatchVector the program is the same
    from torch2jax_ops.geometric import BatchVector

    ids = BatchVector(jnp.asarray(batch.numpy()), 2)
    out = eqx.filter_jit(lambda m, a, b: m(a, b))(nn.from_torch(model),
                                                   jnp.asarray(x.numpy()), ids)
    np.testing.assert_allclose(np.asarray(out), model(x, batch).detach().numpy(), rtol=1e-5,
                               atol=1e-6)


def test_a_dense_mask_that_cuts_graphs_keeps_the_error():
    """max_num_nodes=2 drops nodes: the number of rows depends on the data again."""
    x, _, batch = _two_graphs()
    port = nn.from_torch(_DenseRows(max_num_nodes=2))
    assert port(jnp.asarray(x.numpy()), jnp.asarray(batch.numpy())).shape == (4, 3)  # eager
    from torch2jax_ops.geometric import BatchVector

    ids = BatchVector(jnp.asarray(batch.numpy()), 2)
    with pytest.raises(ValueError, match=r"boolean mask index"):
        eqx.filter_jit(lambda m, a, b: m(a, b))(port, jnp.asarray(x.numpy()), ids)


def test_counted_rows_pads_missing_rows_with_zeros_at_the_end():
    h = jnp.arange(12.0).reshape(2, 3, 2)
    mask = jnp.asarray([[True, True, False], [True, False, False]])
    np.testing.assert_array_equal(_masked.counted_rows(h, mask, 3), [[0, 1], [2, 3], [6, 7]])
    np.testing.assert_array_equal(_masked.counted_rows(h, mask, 4)[3], [0, 0])
    with pytest.raises(ValueError, match="does not cover"):
        _masked.counted_rows(h, mask[:, :2], 3)
