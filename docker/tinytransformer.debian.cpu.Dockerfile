# CONTEXT {'gpu_vendor': 'CPU', 'guest_os': 'DEBIAN'}
# TinyTransformer v1-v4 on the CPU, buildable with no container registry: the base is made locally by
# scripts/setup_docker.sh (debootstrap Debian 12 + python3 + the torch CPU wheel, triton, numpy; `docker import`).
# madengine only knows AMD and NVIDIA, so it never selects this file; madengine-rocprof uses it where no GPU exists.
ARG BASE_DOCKER=madengine-rocprof/cpu-base:latest
FROM $BASE_DOCKER

# madengine runs `git config` in every container it starts: the image needs git (from Debian's mirror).
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends git >/dev/null \
    && rm -rf /var/lib/apt/lists/* && git --version

# Triton kernels (v3/v4) run in Triton's interpreter on the CPU.
ENV PYTHONUNBUFFERED=1 \
    TRITON_INTERPRET=1
RUN python3 -c "import torch, triton, numpy; print('torch', torch.__version__, 'triton', triton.__version__, 'numpy', numpy.__version__)"
WORKDIR /myworkspace
