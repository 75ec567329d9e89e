"""bf16 parameters with fp32 master weights (v4 with --dtype bf16).

use_low_precision_params() turns a model's parameters into bf16 views of ONE flat buffer, so autocast has no weight to
cast in the forward and no gradient to cast back in the backward. MasterAdamW keeps the fp32 master weights and the
AdamW moments in flat fp32 buffers; its step updates every parameter, reading the bf16 gradients where autograd left
them (a table of their places in memory, no gather copy) and writing the new bf16 weights, in one Triton kernel
(tt_kernels.adamw_step)."""
from __future__ import annotations

import math
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
        self.step_count = torch.zeros(1, dtype=torch.float32, device=weights.master.device)
        self.chunks, self.align = self._chunk_table(weights, tt_kernels.adamw_chunk_block())
        # each gradient's distance in elements from the first one (the kernel's base pointer)
        self.grad_offsets = torch.zeros(len(weights.params), dtype=torch.int64, device=weights.master.device)
        self._addrs: tuple[int, ...] | None = None  # the gradient addresses grad_offsets was computed for, when known
        # Pinned host tables that captured CUDA graphs copy into grad_offsets at every replay (kept for good), and one
        # spare for the next capture: it is allocated in an eager step, since a capture must not allocate pinned memory.
        self._graph_tables: dict[tuple[int, ...], torch.Tensor] = {}
        self._spare: torch.Tensor | None = None

    @staticmethod
    def _chunk_table(weights: MasterWeights, block: int) -> tuple[torch.Tensor, int]:
        """(n_chunks, 4) int64 device table (parameter index, first element, flat offset, count) and the largest
        power of two <= 8 that divides every flat offset and size (the kernel's alignment hint)."""
        rows, offset, align = [], 0, 8
        for i, p in enumerate(weights.params):
            n = p.numel()
            rows += [(i, j, offset + j, min(block, n - j)) for j in range(0, n, block)]
            align = math.gcd(align, offset, n)
            offset += n
        return torch.tensor(rows, dtype=torch.int64).to(weights.master.device), align

    def _point_at(self, grads: list[torch.Tensor]) -> int:
        """Load the gradients' distances from the first one into grad_offsets; returns the alignment hint valid for
        them. Eager steps copy only when the addresses changed (and always once a graph exists: its replays overwrite
        grad_offsets); a CUDA graph capture records a copy from a pinned table that stays as it is for the graph's
        life."""
        size = grads[0].element_size()
        for g in grads:
            if not g.is_contiguous() or g.dtype != grads[0].dtype:
                raise RuntimeError("MasterAdamW: gradients must be contiguous and of one dtype, got "
                                   f"{g.dtype} with strides {g.stride()}")
        addrs = tuple(g.data_ptr() for g in grads)
        offsets = [(a - addrs[0]) // size for a in addrs]  # exact: every address is a multiple of the element size
        align = math.gcd(self.align, *offsets)
        on_gpu = self.grad_offsets.is_cuda
        if on_gpu and torch.cuda.is_current_stream_capturing():
            host = self._graph_tables.get(addrs)
            if host is None:
                if self._spare is None:
                    raise RuntimeError("MasterAdamW: run one eager step before capturing a CUDA graph (it allocates "
                                       "the pinned table the graph copies from)")
                host, self._spare = self._spare, None
                host.copy_(torch.tensor(offsets, dtype=torch.int64))
                self._graph_tables[addrs] = host
            self.grad_offsets.copy_(host, non_blocking=True)
            return align
        if on_gpu and self._spare is None:
            self._spare = torch.empty(len(addrs), dtype=torch.int64, pin_memory=True)
        if addrs != self._addrs or self._graph_tables:
            host = torch.tensor(offsets, dtype=torch.int64)
            self.grad_offsets.copy_(host.pin_memory() if on_gpu else host, non_blocking=True)
            self._addrs = addrs
        return align

    @torch.no_grad()
    def step(self, closure=None):
        grads = [p.grad for p in self.weights.params]
        missing = [i for i, g in enumerate(grads) if g is None]
        if missing:
            raise RuntimeError(f"MasterAdamW: {len(missing)} parameter(s) have no gradient (first: index {missing[0]})"
                               "; every parameter must train")
        present = [g for g in grads if g is not None]
        align = self._point_at(present)
        self.step_count += 1
        group = self.param_groups[0]
        beta1, beta2 = group["betas"]
        self.kernels.adamw_step(self.weights.master, present[0], self.grad_offsets, self.chunks, align, self.exp_avg,
                                self.exp_avg_sq, self.weights.low, self.step_count, group["lr"], beta1, beta2,
                                group["eps"], group["weight_decay"])
