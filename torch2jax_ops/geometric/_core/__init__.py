"""The graph layer's private core: what every utility and layer builds on.

* :mod:`._edges`: edge-index checks, the dropped node slot, gather and aggregate;
* :mod:`._adjacency`: a sparse ``adj_t`` as the layers' edge list;
* :mod:`._edge_index`, :mod:`._sparse_tensor`: PyG's ``EdgeIndex`` and torch_sparse's
  ``SparseTensor`` on JAX;
* :mod:`._torch_sort`: torch's CPU sort order, ties included;
* :mod:`._cpu_kernel` (with ``_kernels/``): the C++ kernel of the message-passing sum.
"""
