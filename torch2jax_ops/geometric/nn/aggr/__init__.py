"""``torch_geometric.nn.aggr`` on JAX: aggregations usable as ``aggr=`` of the MessagePassing base.

An aggregation is called as ``aggr(inputs, index, ptr=None, dim_size=None, dim=-2)``.
"""

__all__: list = []
