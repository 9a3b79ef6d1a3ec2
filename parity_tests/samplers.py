"""A pure-torch neighbour-sampling kernel, so that PyG's own NeighborLoader runs in CI.

PyG's ``NeighborLoader`` / ``LinkNeighborLoader`` sample through a compiled
kernel of ``pyg-lib`` or ``torch-sparse``. Neither has a wheel in this
project's package index (pyg-lib is not on PyPI; torch-sparse is source-only
and takes far longer to build than CI allows), so without help every test of
those loaders would skip. :func:`install` registers ``torch_sparse::neighbor_sample``
-- the kernel PyG falls back to -- implemented in plain torch after
torch-sparse's algorithm (uniform sampling without replacement per hop, new
nodes appended in order of discovery), and only when no real kernel is there.

The tests compare what JaxLoader makes of the batches PyG yields; which
kernel drew the neighbours does not change what they check. Test-only: the
package never imports this.
"""
from __future__ import annotations


def install() -> bool:
    """Register the kernel if PyG has none; True when a sampler is available afterwards."""
    import torch
    import torch_geometric.typing as pyg_typing

    if pyg_typing.WITH_PYG_LIB or pyg_typing.WITH_TORCH_SPARSE:
        return True
    try:
        library = torch.library.Library("torch_sparse", "DEF")
        library.define("neighbor_sample(Tensor colptr, Tensor row, Tensor input_node, "
                       "int[] num_neighbors, bool replace, bool directed) -> "
                       "(Tensor, Tensor, Tensor, Tensor)")
    except RuntimeError:  # defined already (a second install in this process)
        pyg_typing.WITH_TORCH_SPARSE = True
        return True
    library.impl("neighbor_sample", _neighbor_sample, "CPU")
    _LIBRARIES.append(library)  # keep the registration alive
    pyg_typing.WITH_TORCH_SPARSE = True
    return True


_LIBRARIES: list = []


def _neighbor_sample(colptr, row, input_node, num_neighbors, replace, directed):
    """torch_sparse's ``neighbor_sample``: (nodes, local rows, local cols, edge ids)."""
    import torch

    samples = input_node.tolist()
    local = {v: i for i, v in enumerate(samples)}
    rows, cols, edges = [], [], []
    begin, end = 0, len(samples)
    colptr, row = colptr.tolist(), row.tolist()
    for num in num_neighbors:
        for i in range(begin, end):
            start, stop = colptr[samples[i]], colptr[samples[i] + 1]
            count = stop - start
            if count == 0:
                continue
            if num < 0 or (num >= count and not replace):
                offsets = range(count)
            elif replace:
                offsets = torch.randint(count, (num,)).tolist()
            else:
                offsets = torch.randperm(count)[:num].tolist()
            for offset in offsets:
                e = start + offset
                v = row[e]
                if v not in local:
                    local[v] = len(samples)
                    samples.append(v)
                rows.append(local[v])
                cols.append(i)
                edges.append(e)
        begin, end = end, len(samples)

    def long(values):
        return torch.tensor(values, dtype=torch.long)
    return long(samples), long(rows), long(cols), long(edges)
