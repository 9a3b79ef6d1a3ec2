import os

from hypothesis import HealthCheck, settings

pytest_plugins = ["pytester"]  # test_parity_tool runs the `parity` fixture as users do

# Random cases stay few enough for CI on 2 cores; raise with HYPOTHESIS_PROFILE=thorough.
settings.register_profile("ci", max_examples=40, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", max_examples=500, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
