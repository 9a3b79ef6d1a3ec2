"""The fx path's mapping table (torch2jax_ops/nn/_functions*.py) vs real torch.

1. every sample call of torch2jax_ops/parity/cases/functions.py (the registered JAX
   implementation against the torch function / Tensor method it stands for);
2. coverage: every key the table registers has a case;
3. end to end: small torch modules using many entries, converted with
   ``nn.from_torch`` and compared eagerly and under ``jax.jit``;
4. dropout in training mode (rate, scaling, keys);
5. the error paths (unmapped functions, data-dependent shapes under jit).
"""
import itertools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from torch2jax_ops import nn, to_jax
from torch2jax_ops.nn import _functions
from torch2jax_ops.nn._fx import key_scope
from torch2jax_ops.nn._registry import functions, methods
from torch2jax_ops.parity import _suite as suite
from torch2jax_ops.parity import compare_modules

CASES = suite.cases("functions")


# ---------------------------------------------------------------------- 1. the table

@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_table_entry_matches_torch(case):
    result = case.run()
    assert result.passed, str(result)
    assert result.leaves, "nothing was compared"


# ------------------------------------------------------------------------ 2. coverage

#: table keys whose cases run under another op name (the same function)
ALIASES = {"Tensor.__getitem__": "operator.getitem"}


def test_every_registered_entry_has_a_case():
    covered = {c.op for c in CASES}
    covered |= {key for key, op in ALIASES.items() if op in covered}
    missing = [k for k in _functions.function_keys() if k not in covered]
    missing += [f"Tensor.{k}" for k in _functions.method_keys() if f"Tensor.{k}" not in covered]
    assert not missing, f"table entries without a parity case: {missing}"
    assert len(_functions.function_keys()) > 300 and len(_functions.method_keys()) > 250


def test_every_function_key_names_a_torch_object():
    from torch2jax_ops.nn._fx import resolve

    assert [k for k in _functions.function_keys() if resolve(k) is None] == []
    assert [k for k in _functions.method_keys() if not hasattr(torch.Tensor, k)] == []


DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
          "float64"]


@pytest.mark.parametrize("x64", [False, True])
def test_result_type_follows_torch(x64):
    """The one promotion helper vs torch.result_type: tensors, 0-d tensors, Python numbers."""
    from torch2jax_ops import _dtypes

    with _dtypes.x64(x64):
        for a, b in itertools.product(DTYPES, DTYPES):
            for shape_a, shape_b in (((2,), (2,)), ((2,), ()), ((), (2,))):
                ta = torch.zeros(shape_a, dtype=getattr(torch, a))
                tb = torch.zeros(shape_b, dtype=getattr(torch, b))
                expected = _dtypes.canonical_jax_dtype(torch.result_type(ta, tb))
                ja = jnp.zeros(shape_a, _dtypes.canonical_jax_dtype(a))
                jb = jnp.zeros(shape_b, _dtypes.canonical_jax_dtype(b))
                if ja.dtype != _dtypes.canonical_jax_dtype(a) or \
                        jb.dtype != _dtypes.canonical_jax_dtype(b):
                    continue
                assert _functions.result_type(ja, jb) == expected, (a, b, shape_a, shape_b)
            for number in (True, 2, 2.5):
                ta = torch.zeros((2,), dtype=getattr(torch, a))
                expected = _dtypes.canonical_jax_dtype(torch.result_type(ta, number))
                ja = jnp.zeros((2,), _dtypes.canonical_jax_dtype(a))
                assert _functions.result_type(ja, number) == expected, (a, number)


def test_dtype_arg_takes_every_flavour():
    from torch2jax_ops import _dtypes

    with _dtypes.x64():
        for given, expected in ((torch.long, jnp.int64), (torch.float, jnp.float32),
                                (float, jnp.float64), (int, jnp.int64), (bool, jnp.bool_),
                                (np.dtype("float16"), jnp.float16), (jnp.bfloat16, jnp.bfloat16),
                                ("int32", jnp.int32)):
            assert _functions.dtype_arg(given) == jnp.dtype(expected), given
    assert _functions.dtype_arg(torch.float64) == jnp.float32  # JAX's 32-bit mode
    with pytest.raises(TypeError, match="dtype"):
        _functions.dtype_arg("not a dtype")


# ---------------------------------------------------------------------- 3. end to end

class Residual(torch.nn.Module):
    """Residual MLP: cat of layers, normalize, masked_fill, max(dim), split loops, heads."""

    def __init__(self):
        super().__init__()
        self.lin1 = torch.nn.Linear(6, 8)
        self.lins = torch.nn.ModuleList([torch.nn.Linear(8, 8) for _ in range(2)])
        self.scale = torch.nn.Parameter(torch.rand(8) + 0.5)
        self.head = torch.nn.Linear(24, 5)

    def forward(self, x, mask):
        h = F.relu(self.lin1(x))
        pos = torch.arange(x.size(0), device=x.device).to(x.dtype) / x.size(0)
        h = h + torch.zeros((h.size(0), 1), device=h.device, dtype=h.dtype) + pos.unsqueeze(-1)
        outs = [h]
        for lin in self.lins:
            h = h + F.dropout(F.leaky_relu(lin(h), 0.2), p=0.5, training=self.training)
            outs.append(h)
        h = torch.cat(outs, dim=-1)
        h = h.masked_fill(~mask.view(-1, 1), 0.0)
        parts = [p * self.scale[i] for i, p in enumerate(torch.split(h, 8, dim=1))]
        h = torch.stack(parts, dim=0).sum(0) / len(parts)
        values, index = h.max(dim=1)
        best = h.max(dim=0).values
        z = F.normalize(torch.cat([h, h * values.unsqueeze(-1), h - best], -1), p=2.0, dim=-1)
        logits = self.head(z)
        return F.log_softmax(logits, dim=-1), logits.softmax(-1), index, values.mean()


class Attention(torch.nn.Module):
    """Attention block: view/transpose/permute, matmul/einsum, masked softmax, layer_norm."""

    def __init__(self, dim=8, heads=2):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.out = torch.nn.Parameter(torch.randn(dim, dim) / dim ** 0.5)
        self.gamma = torch.nn.Parameter(torch.ones(dim))
        self.beta = torch.nn.Parameter(torch.zeros(dim))

    def forward(self, x, valid):
        b, n, d = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q = q.view(b, n, self.heads, -1).transpose(1, 2)
        k = k.reshape(b, n, self.heads, d // self.heads).permute(0, 2, 3, 1)
        v = v.view(b, n, self.heads, -1).transpose(1, 2).contiguous()
        scores = (q @ k) / (d // self.heads) ** 0.5
        scores = scores.masked_fill(~valid[:, None, None, :], float("-inf"))
        attn = torch.softmax(scores, dim=-1)
        y = torch.einsum("bhij,bhjd->bhid", attn, v).transpose(1, 2).reshape(b, n, d)
        y = F.linear(y, self.out)
        y = F.layer_norm(x + F.gelu(y, approximate="tanh"), (d,), self.gamma, self.beta)
        return y, attn.sum(-1)


class Indexing(torch.nn.Module):
    """Embeddings, one_hot, gather/index_select, sort/topk, cumsum, where, clamp, in place."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Parameter(torch.randn(7, 4))
        self.w = torch.nn.Parameter(torch.randn(4, 3))

    def forward(self, x, idx, batch):
        e = F.embedding(idx, self.emb, padding_idx=0)
        onehot = F.one_hot(batch, num_classes=3).to(x.dtype)
        h = torch.tanh(e @ self.w) + onehot + x
        order = torch.argsort(h[:, 0], descending=True, stable=True)
        h = h.index_select(0, order)
        top = h.topk(2, dim=1).values
        g = torch.gather(h, 1, idx.new_zeros(h.size(0), 1))
        c = torch.cumsum(h.clamp(min=-0.5, max=0.5), dim=0)
        h = torch.where(h > 0, h, 0.1 * h)
        h = h.relu_()  # in place, rebound by the interpreter
        h = h.clone()
        h[:, 0] = 0.0  # setitem, rebound by the interpreter
        c.mul_(2)  # in place without assignment
        n = h.new_ones(h.size(0)).sum()
        return h * n, top, g.squeeze(-1), c, x.abs().pow(2).mean(dim=(0, 1), keepdim=True)


class WithLoss(torch.nn.Module):
    """A forward that returns losses (cross_entropy with label smoothing, mse, bce)."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(5, 4)

    def forward(self, x, target):
        logits = self.lin(x)
        ce = F.cross_entropy(logits, target, label_smoothing=0.1)
        nll = F.nll_loss(F.log_softmax(logits, 1), target, reduction="sum")
        mse = F.mse_loss(torch.sigmoid(logits), F.one_hot(target, 4).float())
        bce = F.binary_cross_entropy_with_logits(logits, (target[:, None] == 1).float()
                                                 .expand_as(logits))
        return ce + nll / x.size(0) + mse + bce


def _inputs(name):
    g = torch.Generator().manual_seed(0)
    if name == "residual":
        return Residual(), (torch.randn(6, 6, generator=g),
                            torch.tensor([True, False, True, True, False, True]))
    if name == "attention":
        valid = torch.ones(2, 5, dtype=torch.bool)
        valid[1, 3:] = False
        return Attention(), (torch.randn(2, 5, 8, generator=g), valid)
    if name == "indexing":
        return Indexing(), (torch.randn(6, 3, generator=g), torch.tensor([0, 3, 6, 2, 0, 5]),
                            torch.tensor([0, 0, 1, 1, 2, 2]))
    return WithLoss(), (torch.randn(6, 5, generator=g), torch.tensor([0, 3, 1, 1, 2, 0]))


MODELS = ["residual", "attention", "indexing", "with-loss"]


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("name", MODELS)
def test_models_through_the_fx_path(name, jit):
    torch.manual_seed(0)
    model, args = _inputs(name)
    model.eval()
    port = nn.from_torch(model)
    result = compare_modules(model, port, *args, jit=jit)
    assert result.passed, str(result)


@pytest.mark.parametrize("name", MODELS)
def test_models_under_plain_jax_jit(name):
    torch.manual_seed(0)
    model, args = _inputs(name)
    model.eval()
    port = nn.from_torch(model)
    jax_args = [to_jax(a, allow_downcast=True) for a in args]
    ours = jax.jit(lambda m, *a: m(*a))(port, *jax_args)
    with torch.no_grad():
        theirs = model(*args)
    flat_ours = jax.tree_util.tree_leaves(ours)
    flat_theirs = [theirs] if isinstance(theirs, torch.Tensor) else list(theirs)
    assert len(flat_ours) == len(flat_theirs)
    for a, e in zip(flat_ours, flat_theirs):
        np.testing.assert_allclose(np.asarray(a, dtype=np.float64),
                                   e.double().numpy(), rtol=2e-5, atol=2e-5)


# ------------------------------------------------------------------- 4. dropout training

def test_dropout_training_rate_scale_and_keys():
    dropout = functions()["torch.nn.functional.dropout"]
    x = jnp.full((100_000,), 2.0, jnp.float32)
    p = 0.3
    with key_scope(jax.random.key(1)):
        y = dropout(x, p, training=True)
    zeros = float(jnp.mean(y == 0))
    sigma = (p * (1 - p) / x.size) ** 0.5
    assert abs(zeros - p) < 3 * sigma, (zeros, p)
    kept = np.asarray(y[y != 0])
    np.testing.assert_allclose(kept, 2.0 / (1 - p), rtol=1e-6)
    with key_scope(jax.random.key(1)):
        again = dropout(x, p, training=True)
    with key_scope(jax.random.key(2)):
        other = dropout(x, p, training=True)
    assert bool(jnp.all(again == y)) and not bool(jnp.all(other == y))
    assert dropout(x, p, training=False) is x


class Dropper(torch.nn.Module):
    def forward(self, x):
        return F.dropout(x, 0.5, training=True) + F.dropout(x, 0.5, training=True)


def test_dropout_through_the_port_needs_a_key():
    port = nn.from_torch(Dropper())
    x = jnp.ones((1000,))
    with pytest.raises(ValueError, match=r"key=jax\.random\.key"):
        port(x)
    a = port(x, key=jax.random.key(0))
    b = port(x, key=jax.random.key(0))
    assert bool(jnp.all(a == b))
    # two dropout calls in one forward draw different masks
    assert set(np.unique(np.asarray(a)).tolist()) <= {0.0, 2.0, 4.0}
    assert float(jnp.mean(a == 2.0)) > 0.3
    jitted = jax.jit(lambda m, x, k: m(x, key=k))(port, x, jax.random.key(0))
    assert bool(jnp.all(jitted == a))


# --------------------------------------------------------------------- 5. error paths

class Unmapped(torch.nn.Module):
    def forward(self, x):
        return torch.special.bessel_j0(x)


def test_an_unmapped_function_names_its_path_and_the_fix():
    port = nn.from_torch(Unmapped())
    with pytest.raises(Exception) as info:
        port(jnp.ones(3))
    message = str(info.value)
    assert "bessel_j0" in message and "register_function(" in message


class WhereOne(torch.nn.Module):
    def forward(self, x):
        return torch.where(x > 0)[0]


class OneHotInferred(torch.nn.Module):
    def forward(self, idx):
        return F.one_hot(idx)


class MaskIndex(torch.nn.Module):
    def forward(self, x):
        return x[x > 0]


def test_data_dependent_shapes_work_eagerly_and_raise_under_jit():
    x = jnp.asarray([1.0, -1.0, 2.0])
    idx = jnp.asarray([0, 2, 1])
    cases = [(WhereOne(), x, [0, 2], r"`condition`.*three-argument torch\.where"),
             (OneHotInferred(), idx, np.eye(3)[[0, 2, 1]], r"`num_classes`.*num_classes="),
             (MaskIndex(), x, [1.0, 2.0], r"boolean mask.*masked_fill")]
    for module, value, eager, pattern in cases:
        port = nn.from_torch(module)
        np.testing.assert_array_equal(np.asarray(port(value)), eager)
        with pytest.raises(ValueError, match=pattern):
            jax.jit(lambda m, v: m(v))(port, value)


def test_bad_arguments_name_the_op_and_argument():
    table = functions()
    with pytest.raises(IndexError, match=r"^index_select: `index` contains 3, out of range"):
        table["torch.index_select"](jnp.ones((3, 2)), 0, jnp.asarray([0, 3]))
    with pytest.raises(IndexError, match=r"^take: index out of range"):
        table["torch.take"](jnp.ones((3, 2)), jnp.asarray([0, 6]))
    with pytest.raises(IndexError, match=r"^getitem: index 5 is out of bounds"):
        table["operator.getitem"](jnp.ones((3, 2)), 5)
    with pytest.raises(ValueError, match=r"^dropout: dropout probability"):
        table["torch.nn.functional.dropout"](jnp.ones(3), 1.5)
    with pytest.raises(ValueError, match=r"^cross_entropy: 'avg' is not a valid value"):
        table["torch.nn.functional.cross_entropy"](jnp.ones((2, 3)), jnp.asarray([0, 1]),
                                                   reduction="avg")
    with pytest.raises(TypeError, match=r"^mean\(\): could not infer output dtype"):
        table["torch.mean"](jnp.asarray([1, 2]))
    with pytest.raises(ValueError, match=r"^repeat_interleave: .*output_size"):
        jax.jit(lambda r: table["torch.repeat_interleave"](jnp.ones(3), r))(jnp.asarray([1, 2,
                                                                                        0]))
    with pytest.raises(TypeError, match=r"^add_: result type float32 can't be cast"):
        methods()["add_"](jnp.asarray([1, 2]), 0.5)
    assert re.search("matmul", str(pytest.raises(TypeError, table["torch.matmul"],
                                                 jnp.ones((2, 2)),
                                                 jnp.ones((2, 2), jnp.int32)).value))


def test_flip_takes_dims_by_keyword_and_refuses_what_torch_refuses():
    """PyG's LCMAggregation calls ``x.flip(dims=[1])``; ``x.flip()`` without dims and an
    unknown keyword raise TypeError, as torch's do."""
    flip = methods()["flip"]
    x = torch.arange(6.0).view(2, 3)
    jx = to_jax(x)
    np.testing.assert_array_equal(np.asarray(flip(jx, dims=[1])), x.flip(dims=[1]).numpy())
    np.testing.assert_array_equal(np.asarray(flip(jx, 0, 1)), x.flip(0, 1).numpy())
    with pytest.raises(TypeError):
        x.flip()
    with pytest.raises(TypeError, match=r'missing 1 required positional argument: "dims"'):
        flip(jx)
    with pytest.raises(TypeError, match=r"unexpected or repeated keyword argument 'dim'"):
        flip(jx, dim=[1])
    with pytest.raises(TypeError, match=r"repeated keyword argument 'dims'"):
        flip(jx, 0, dims=[1])
