"""Power and VRAM samplers (madengine's gpu_info_power_profiler / gpu_info_vram_profiler).

Standard library only, plus pynvml (NVIDIA) or amdsmi (AMD) when importable: this package is mounted into
containers where madengine-rocprof is not installed and run as `python3 -m madengine_rocprof.samplers`.
"""
