"""``torch_geometric.nn.norm`` on JAX: PyG's normalisation layers."""
from .._models import BatchNorm

__all__ = ["BatchNorm"]
