"""A few optimizer steps on every rank (the embedded tracer records them); rank 0 then succeeds and prints madengine's
performance line, rank 1 waits until rank 0's trace is complete (its Perfetto file is renamed into place last) and
exits 1, as a crashing rank would. srun then ends the step on every node (--kill-on-bad-exit)."""
import glob
import os
import sys
import time

import torch

rank = int(os.environ["RANK"])
# the working directory is nodes/<hostname>/ on the shared storage: rank 0's files are visible from here
rank0_trace = os.path.join("..", "*", "profiler", "*", "rank0_*_perfetto_trace.json")
model = torch.nn.Linear(16, 16)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(4):
    model(torch.randn(8, 16)).square().mean().backward()
    opt.step()
    opt.zero_grad()
if rank == 0:
    print("performance: 4.0 steps_per_run", flush=True)
    sys.exit(0)
deadline = time.monotonic() + 120
while not glob.glob(rank0_trace) and time.monotonic() < deadline:
    time.sleep(0.2)
print(f"rank {rank}: failing on purpose", file=sys.stderr, flush=True)
sys.exit(1)
