"""The parity suite's cases: one module per section, registered with
``torch2jax_ops.parity._suite.register``. pytest (``parity_tests/``) parametrises
over them and ``torch2jax-ops parity`` (the report) loads them from here. They
ship with the package, as torch ships its OpInfo database in ``torch.testing``,
so an installed wheel runs the report outside any checkout; they import torch
and PyG (the parity extras), so only the suite's loader imports them, never the
rest of the package."""
