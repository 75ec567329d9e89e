"""End of a 2-rank gloo DDP run with torch.profiler (CPU) running, in the order given: `old` destroys the process
group and frees DDP when main() returns; `new` frees DDP first. Run under torchrun (see run.sh)."""
import atexit
import gc
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main(order: str) -> None:
    dist.init_process_group("gloo")
    model = DDP(torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(4)]))
    opt = torch.optim.AdamW(model.parameters())
    for _ in range(5):
        model(torch.randn(8, 64)).sum().backward()
        opt.step()
        opt.zero_grad()
    dist.all_reduce(torch.zeros(2))
    if order == "new":
        del model, opt
        gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    if os.environ.get("PROF") == "1":
        prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
        prof.start()
        atexit.register(prof.stop)
    main(sys.argv[1])
