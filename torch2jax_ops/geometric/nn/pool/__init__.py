"""``torch_geometric.nn.pool`` on JAX: global readouts and pooling layers with static shapes."""
from ..._pool import global_add_pool, global_max_pool, global_mean_pool

__all__ = ["global_add_pool", "global_mean_pool", "global_max_pool"]
