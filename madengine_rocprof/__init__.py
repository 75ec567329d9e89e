"""madengine-rocprof: one-command GPU profiling of AI workloads for madengine."""

__version__ = "0.1.0"
