# CONTEXT {'gpu_vendor': 'NVIDIA', 'guest_os': 'UBUNTU'}
# TinyTransformer v1-v4 on CUDA. The base ships PyTorch + Triton; pynvml feeds the power/VRAM samplers.
# Override the base with --additional-context '{"docker_build_arg": {"BASE_DOCKER": "..."}}'.
ARG BASE_DOCKER=nvcr.io/nvidia/pytorch:25.01-py3
FROM $BASE_DOCKER

RUN python3 -c "import torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)" \
 && (python3 -c "import pynvml" 2>/dev/null || pip install --no-cache-dir nvidia-ml-py || echo "note: pynvml missing: power/VRAM samplers will report it")

ENV PYTHONUNBUFFERED=1
WORKDIR /myworkspace
