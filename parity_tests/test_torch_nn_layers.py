"""torch.nn's recurrent layers, attention, convolutions and pools beyond the parity cases:
inside user models (the fx path) under jax.jit and jax.grad, training-mode dropout (a key; the
deterministic p=1 against torch), packed sequences and bad input (clear errors)."""
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

from torch2jax_ops.nn import from_torch, named_arrays
from torch2jax_ops.parity import compare_modules


def _perturbed(module, seed=0):
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.add_(0.2 * torch.randn(p.shape, generator=gen))
    return module


class SeqModel(torch.nn.Module):
    """GRU -> attention -> Conv1d/MaxPool1d -> PReLU -> adaptive pool -> GRUCell loop."""

    def __init__(self):
        super().__init__()
        self.gru = torch.nn.GRU(5, 8, num_layers=2, bidirectional=True, batch_first=True)
        self.attn = torch.nn.MultiheadAttention(16, 4, batch_first=True)
        self.conv = torch.nn.Conv1d(16, 6, 3, padding=1)
        self.pool = torch.nn.MaxPool1d(2)
        self.act = torch.nn.PReLU(6)
        self.squeeze = torch.nn.AdaptiveAvgPool1d(1)
        self.cell = torch.nn.GRUCell(6, 6)

    def forward(self, x, mask):
        h, _ = self.gru(x)
        a, w = self.attn(h, h, h, key_padding_mask=mask)
        y = self.act(self.pool(self.conv(a.transpose(1, 2))))
        z = self.squeeze(y).squeeze(-1)
        s = z
        for _ in range(3):
            s = self.cell(z, s)
        return s, w


def _inputs():
    rng = np.random.default_rng(0)
    x = torch.tensor(rng.standard_normal((3, 6, 5)), dtype=torch.float32)
    mask = torch.zeros(3, 6, dtype=torch.bool)
    mask[1, 4:] = True
    return x, mask


def test_layers_inside_a_user_model_match_torch_under_jit():
    model = _perturbed(SeqModel()).eval()
    port = from_torch(model)
    x, mask = _inputs()
    result = compare_modules(model, port, x, mask)  # jitted, every parameter's gradient
    assert result.passed, str(result)
    assert any(leaf.path == "grad gru.weight_hh_l1_reverse" for leaf in result.leaves)
    assert any(leaf.path == "grad act.weight" for leaf in result.leaves)


def test_jax_grad_of_the_port_matches_torch_autograd():
    model = _perturbed(SeqModel(), 1).eval()
    port = from_torch(model)
    x, mask = _inputs()
    out, _ = model(x, mask)
    out.square().sum().backward()

    @jax.jit
    def loss_grad(p):
        return jax.grad(lambda p: jnp.sum(jnp.square(p(jnp.asarray(x.numpy()),
                                                        jnp.asarray(mask.numpy()))[0])))(p)

    grads = dict(named_arrays(loss_grad(port)))
    for name, param in model.named_parameters():
        np.testing.assert_allclose(np.asarray(grads[name]), param.grad.numpy(), rtol=2e-4,
                                   atol=2e-5, err_msg=name)


def test_lstm_training_dropout_takes_a_key():
    lstm = _perturbed(torch.nn.LSTM(4, 5, num_layers=3, dropout=0.5)).train()
    port = from_torch(lstm)
    x = jnp.asarray(np.random.default_rng(1).standard_normal((6, 2, 4)), jnp.float32)
    with pytest.raises(Exception, match="key"):
        port(x)
    a = port(x, key=jax.random.key(0))[0]
    b = port(x, key=jax.random.key(0))[0]
    c = port(x, key=jax.random.key(1))[0]
    plain = from_torch(lstm.eval())(x)[0]
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert not np.allclose(np.asarray(a), np.asarray(c))
    assert not np.allclose(np.asarray(a), np.asarray(plain))


def test_training_dropout_of_one_matches_torch():
    """p = 1 drops everything: deterministic, so torch's training path can be compared."""
    torch.manual_seed(0)
    x = torch.randn(5, 2, 4)
    lstm = _perturbed(torch.nn.GRU(4, 5, num_layers=2, dropout=1.0)).train()
    out, h = lstm(x)
    got_out, got_h = from_torch(lstm)(jnp.asarray(x.numpy()), key=jax.random.key(0))
    np.testing.assert_allclose(np.asarray(got_out), out.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(got_h), h.detach().numpy(), rtol=1e-5, atol=1e-6)
    mha = _perturbed(torch.nn.MultiheadAttention(8, 2, dropout=1.0)).train()
    q = torch.randn(3, 2, 8)
    out, w = mha(q, q, q)
    got, got_w = from_torch(mha)(*(jnp.asarray(q.numpy()),) * 3, dropout_key=jax.random.key(0))
    np.testing.assert_allclose(np.asarray(got), out.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(np.asarray(got_w), 0.0)
    half = from_torch(_perturbed(torch.nn.MultiheadAttention(8, 2, dropout=0.5)).train())
    with pytest.raises(Exception, match="key"):
        half(*(jnp.asarray(q.numpy()),) * 3)
    a, _ = half(*(jnp.asarray(q.numpy()),) * 3, dropout_key=jax.random.key(0))
    b, _ = half(*(jnp.asarray(q.numpy()),) * 3, dropout_key=jax.random.key(1))
    assert not np.allclose(np.asarray(a), np.asarray(b))


def test_packed_sequence_is_refused_with_what_to_do():
    class Packed(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = torch.nn.LSTM(3, 4)

        def forward(self, x, lengths):
            packed = torch.nn.utils.rnn.pack_padded_sequence(x, lengths, enforce_sorted=False)
            return torch.nn.utils.rnn.pad_packed_sequence(self.lstm(packed)[0])[0]

    port = from_torch(Packed())
    with pytest.raises(TypeError, match="Pass the padded batch"):
        port(jnp.ones((5, 2, 3)), jnp.array([5, 3]))
    lstm = torch.nn.LSTM(3, 4)
    packed = torch.nn.utils.rnn.pack_sequence([torch.ones(3, 3), torch.ones(2, 3)])
    with pytest.raises(TypeError, match="PackedSequence"):
        from_torch(lstm)(packed)


@pytest.mark.parametrize("make,args,match", [
    (lambda: torch.nn.LSTM(4, 5), [jnp.ones((3, 2, 6))], "input_size"),
    (lambda: torch.nn.LSTM(4, 5), [jnp.ones((3, 2, 4)), jnp.ones((1, 2, 5))], "pair"),
    (lambda: torch.nn.GRU(4, 5, num_layers=2), [jnp.ones((3, 2, 4)), jnp.ones((1, 2, 5))],
     r"Expected hidden size \(2, 2, 5\)"),
    (lambda: torch.nn.RNN(4, 5), [jnp.ones((3, 2, 2, 4))], "2D or 3D"),
    (lambda: torch.nn.GRUCell(4, 5), [jnp.ones((2, 4)), jnp.ones((3, 5))], "hx has shape"),
    (lambda: torch.nn.Conv1d(4, 2, 3), [jnp.ones((2, 3, 9))], "4 channels"),
    (lambda: torch.nn.Conv2d(4, 2, 3), [jnp.ones((4, 9))], "4-D"),
    (lambda: torch.nn.PReLU(4), [jnp.ones((4,))], "num_parameters=4"),
    (lambda: torch.nn.MaxPool1d(3, stride=1), [jnp.ones((1, 1, 2))], "output size is too small"),
    (lambda: torch.nn.MultiheadAttention(8, 2),
     [jnp.ones((3, 2, 8))] * 3 + [None, True, jnp.zeros((3, 4), bool)], "2D attn_mask"),
    (lambda: torch.nn.MultiheadAttention(8, 2),
     [jnp.ones((3, 2, 8))] * 3 + [jnp.zeros((2, 3), jnp.int32)], "bool and floating"),
    (lambda: torch.nn.MultiheadAttention(8, 2),
     [jnp.ones((3, 2, 8))] * 3 + [None, True, None, True, True], "Need attn_mask"),
    (lambda: torch.nn.EmbeddingBag(10, 3, include_last_offset=True),
     [jnp.arange(6), jnp.array([0, 2, 4])], "last offset must be len"),
    (lambda: torch.nn.EmbeddingBag(10, 3), [jnp.arange(6), None, jnp.ones(6)],
     "only supported for mode='sum'"),
    (lambda: torch.nn.Flatten(2, 1), [jnp.ones((2, 3, 4))], "start_dim=2"),
])
def test_bad_input_raises_naming_the_argument(make, args, match):
    with pytest.raises((ValueError, TypeError), match=match):
        from_torch(make())(*args)


def test_torch_rejects_the_same_bad_inputs():
    """The cases above are errors in torch too (the port does not refuse what torch runs)."""
    with pytest.raises(RuntimeError):
        torch.nn.MaxPool1d(3, stride=1)(torch.ones(1, 1, 2))
    with pytest.raises(RuntimeError):
        torch.nn.PReLU(4)(torch.ones(4))
    with pytest.raises(RuntimeError):
        torch.nn.GRU(4, 5, num_layers=2)(torch.ones(3, 2, 4), torch.ones(1, 2, 5))


def test_torch_embedding_bag_disagrees_with_itself_past_the_last_offset():
    """Why the port refuses a last offset short of len(input): torch's sum runs the last bag
    to its offset while its mean divides by the ids up to the end of input."""
    bag = torch.nn.EmbeddingBag(10, 1, mode="mean", include_last_offset=True)
    with torch.no_grad():
        bag.weight.copy_(torch.ones(10, 1))
    ids = torch.arange(10)
    assert bag(ids, torch.tensor([0, 3, 7]))[1].item() == pytest.approx(4 / 7)


def test_ports_keep_torch_state_dict_names():
    for module in (torch.nn.LSTM(3, 4, num_layers=2, bidirectional=True, proj_size=2),
                   torch.nn.MultiheadAttention(8, 2, kdim=3, vdim=5, add_bias_kv=True),
                   torch.nn.Conv2d(2, 3, 3), torch.nn.PReLU(3), torch.nn.GRUCell(2, 3)):
        names = set(dict(named_arrays(from_torch(module))))
        assert names == set(module.state_dict()), type(module).__name__


def test_set2set_runs_the_lstm_port():
    from torch_geometric.nn.aggr import Set2Set

    from torch2jax_ops.nn import LSTM

    port = from_torch(Set2Set(4, processing_steps=2))
    assert isinstance(port.lstm, LSTM)
    leaves = jax.tree_util.tree_leaves(eqx.filter(port, eqx.is_array))
    assert len(leaves) == 4


def _one_case_per_layer() -> list:
    """The first float32 torch_nn case of every op whose call takes positional inputs only."""
    from torch2jax_ops.parity import _suite as suite

    chosen: dict = {}
    for case in suite.cases("torch_nn"):
        if case.dtype == "float32" and case.op not in chosen:
            chosen[case.op] = case
    return list(chosen.values())


class _UserModel(torch.nn.Module):
    """A user's model around one layer: the fx path traces its forward and calls the port."""

    def __init__(self, layer):
        super().__init__()
        self.layer = layer

    def forward(self, *inputs):
        return self.layer(*inputs)


@pytest.mark.parametrize("case", _one_case_per_layer(), ids=lambda c: c.op)
def test_each_layer_inside_a_user_model_under_jit_and_grad(case):
    module, _, args, kwargs, _ = case.build()
    assert not kwargs, f"{case.id}: the first case of a layer passes its inputs by position"
    model = _UserModel(module)
    port = from_torch(model)
    assert type(port).__name__.startswith("TracedModule")
    result = compare_modules(model, port, *args)  # jitted forward + every gradient
    assert result.passed, str(result)
    assert any(leaf.path.startswith("grad") for leaf in result.leaves) or not list(
        module.parameters())
