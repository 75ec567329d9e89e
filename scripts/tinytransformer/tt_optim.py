"""bf16 parameters with fp32 master weights (v4 with --dtype bf16).

use_low_precision_params() turns a model's parameters into bf16 views of ONE flat buffer, so autocast has no weight to
cast in the forward and no gradient to cast back in the backward. MasterAdamW keeps the fp32 master weights and the
AdamW moments in flat fp32 buffers; its step gathers the bf16 gradients into one flat buffer and updates every
parameter, writing the new bf16 weights, in one Triton kernel (tt_kernels.adamw_step)."""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class MasterWeights:
    params: list[torch.nn.Parameter]  # the model's parameters, now views of `low`
    master: torch.Tensor              # flat fp32 master weights (the numbers AdamW updates)
    low: torch.Tensor                 # flat low-precision buffer the parameters view


def use_low_precision_params(model: torch.nn.Module, dtype=torch.bfloat16) -> MasterWeights:
    """Re-point every trainable parameter of `model` at a `dtype` view of one flat buffer; the fp32 master copy keeps
    the exact current values. Stored as model.master_weights (make_optimizer picks MasterAdamW from it)."""
    params = [p for p in model.parameters() if p.requires_grad]
    n = sum(p.numel() for p in params)
    device = params[0].device
    master = torch.empty(n, dtype=torch.float32, device=device)
    low = torch.empty(n, dtype=dtype, device=device)
    offset = 0
    with torch.no_grad():
        for p in params:
            k = p.numel()
            master[offset:offset + k].copy_(p.reshape(-1))
            p.data = low[offset:offset + k].view(p.shape)
            offset += k
        low.copy_(master)
    weights = MasterWeights(params, master, low)
    object.__setattr__(model, "master_weights", weights)  # a plain attribute, not a submodule or buffer
    return weights


class MasterAdamW(torch.optim.Optimizer):
    """AdamW (torch.optim.AdamW's update, one parameter group) on fp32 master weights for low-precision parameters.
    Capturable in a CUDA graph: the step count lives on the device."""

    def __init__(self, weights: MasterWeights, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        super().__init__(weights.params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))
        import tt_kernels  # after the TRITON_INTERPRET decision
        self.kernels = tt_kernels
        self.weights = weights
        self.exp_avg = torch.zeros_like(weights.master)
        self.exp_avg_sq = torch.zeros_like(weights.master)
        self.flat_grad = torch.empty_like(weights.low)
        self.step_count = torch.zeros(1, dtype=torch.float32, device=weights.master.device)

    @torch.no_grad()
    def step(self, closure=None):
        grads = [p.grad for p in self.weights.params]
        missing = [i for i, g in enumerate(grads) if g is None]
        if missing:
            raise RuntimeError(f"MasterAdamW: {len(missing)} parameter(s) have no gradient (first: index {missing[0]})"
                               "; every parameter must train")
        torch.cat([g.reshape(-1) for g in grads if g is not None], out=self.flat_grad)  # one gather kernel
        self.step_count += 1
        group = self.param_groups[0]
        beta1, beta2 = group["betas"]
        self.kernels.adamw_step(self.weights.master, self.flat_grad, self.exp_avg, self.exp_avg_sq, self.weights.low,
                                self.step_count, group["lr"], beta1, beta2, group["eps"], group["weight_decay"])
