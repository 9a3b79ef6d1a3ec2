"""The parity suite's cases: test data, one module per section, registered with
``torch2jax_ops.parity._suite.register``. pytest parametrises over them and
``torch2jax-ops parity`` (the report) loads them from here; the package never
imports them."""
