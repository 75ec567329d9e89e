"""`madengine-rocprof run`: select models, build or reuse their image, run them under a profiling tool chain in a
container (or locally), and collect everything into one run directory per model x tool chain."""
