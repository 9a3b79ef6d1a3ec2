"""``torch_geometric.nn.pool`` on JAX: global readouts and pooling layers with static shapes."""
from ._global import global_add_pool, global_max_pool, global_mean_pool
from ._sort import global_sort_pool
from ._jumping_knowledge import JumpingKnowledge
from ._topk import SAGPooling, TopKPooling

__all__ = ["global_add_pool", "global_mean_pool", "global_max_pool",
           "global_sort_pool", "TopKPooling", "SAGPooling", "JumpingKnowledge"]
