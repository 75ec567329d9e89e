# CONTEXT {'gpu_vendor': 'AMD', 'guest_os': 'UBUNTU'}
# TinyTransformer v1-v4 on ROCm. The base ships PyTorch, Triton and rocprofv3 (ROCm >= 6.4 for amdsmi).
# Override the base with --additional-context '{"docker_build_arg": {"BASE_DOCKER": "..."}}'.
ARG BASE_DOCKER=rocm/pytorch:latest
FROM $BASE_DOCKER

# The workload needs only torch + triton (both in the base); amdsmi feeds the power/VRAM samplers.
RUN python3 -c "import torch, triton; print('torch', torch.__version__, 'hip', torch.version.hip, 'triton', triton.__version__)" \
 && (python3 -c "import amdsmi" 2>/dev/null || echo "note: amdsmi python module missing: power/VRAM samplers will report it")

ENV PYTHONUNBUFFERED=1
WORKDIR /myworkspace
