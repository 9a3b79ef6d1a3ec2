"""Parity tests against the real torch / torch_scatter / torch_geometric (torch installed)."""
