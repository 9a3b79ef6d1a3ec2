"""Helpers shared by the two test trees (``tests/``, torch-free, and ``parity_tests/``):
the fast tier's marks, a worker's memory bound, reference sums. Test modules import
helpers from here, never from another test module. Not part of the installed package."""
