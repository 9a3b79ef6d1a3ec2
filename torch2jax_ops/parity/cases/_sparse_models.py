"""User-style models with torch sparse tensors for the "graph_unet" parity cases: PyG's
``augment_adj`` chain (GraphUNet) and the torch sparse table entries.

Module-level imports, as users write them (fx maps a PyG function the forward reads from
its module's globals); imported lazily by ``graph_unet.py``, so that loading the suite does
not import torch.
"""
import torch
from torch_geometric.utils import (
    add_self_loops,
    remove_self_loops,
    to_edge_index,
    to_torch_coo_tensor,
    to_torch_csr_tensor,
)


class EdgeWeights(torch.nn.Module):
    """A learnt weight per edge: ``lin(x_i * x_j)``."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 1)

    def weights(self, x, edge_index):
        return self.lin(x[edge_index[0]] * x[edge_index[1]]).view(-1)

class Augment(EdgeWeights):
    """PyG's augment_adj (GraphUNet), CSR or COO, read back with to_edge_index /
    to_sparse_coo / coalesce."""

    def __init__(self, layout="csr", read="to_edge_index", sign=False):
        super().__init__()
        self.layout, self.read, self.sign = layout, read, sign

    def forward(self, x, edge_index):
        n = x.size(0)
        w = self.weights(x, edge_index)
        if self.sign:  # +-1 weights: entries of the square that sum to zero stay stored
            w = torch.sign(w) + 0 * w
        edge_index, w = remove_self_loops(edge_index, w)
        edge_index, w = add_self_loops(edge_index, w, num_nodes=n)
        to_sparse = to_torch_csr_tensor if self.layout == "csr" else to_torch_coo_tensor
        adj = to_sparse(edge_index, w, size=(n, n))
        adj2 = adj @ adj
        if self.read == "to_edge_index":
            ei, w2 = to_edge_index(adj2)
        elif self.read == "to_sparse_coo":
            coo = adj2.to_sparse_coo()
            ei, w2 = coo.indices(), coo.values()
        else:  # coalesce (torch's COO @ COO result is coalesced already)
            coo = adj2.coalesce()
            ei, w2 = coo.indices(), coo.values()
        ei, w2 = remove_self_loops(ei, w2)
        return ei, w2 * 3.0

class Csr(EdgeWeights):
    """to_torch_csr_tensor's parts: crow / col / values / to_dense."""

    def forward(self, x, edge_index):
        adj = to_torch_csr_tensor(edge_index, self.weights(x, edge_index),
                                  size=(x.size(0), x.size(0)))
        return (adj.crow_indices(), adj.col_indices(), adj.values(),
                adj.to_dense())

class Coo(EdgeWeights):
    """torch.sparse_coo_tensor with repeats, coalesced; the dense form."""

    def forward(self, x, edge_index):
        n = x.size(0)
        adj = torch.sparse_coo_tensor(edge_index, self.weights(x, edge_index), (n, n))
        adj = adj.coalesce()
        return adj.indices(), adj.values(), adj.to_dense()

class Ptr(torch.nn.Module):
    """index2ptr: torch._convert_indices_from_coo_to_csr on sorted row ids."""

    def __init__(self, out_int32=False):
        super().__init__()
        self.out_int32 = out_int32

    def forward(self, x, edge_index):
        row = edge_index[0].sort()[0]
        ptr = torch._convert_indices_from_coo_to_csr(row, x.size(0),
                                                     out_int32=self.out_int32)
        return ptr, x[:, 0] * ptr[:-1].to(x.dtype)

class SparseDense(EdgeWeights):
    """adj @ x and torch.sparse.mm(adj, x) with a CSR or COO adj."""

    def __init__(self, layout="csr", fn="matmul"):
        super().__init__()
        self.layout, self.fn = layout, fn

    def forward(self, x, edge_index):
        n = x.size(0)
        to_sparse = to_torch_csr_tensor if self.layout == "csr" else to_torch_coo_tensor
        adj = to_sparse(edge_index, self.weights(x, edge_index), size=(n, n))
        return adj @ x if self.fn == "matmul" else torch.sparse.mm(adj, x)


MODELS = {"Augment": Augment, "Csr": Csr, "Coo": Coo, "Ptr": Ptr,
          "SparseDense": SparseDense}
