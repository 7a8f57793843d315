"""The Python worker docs/python.md shows: binds this process's GPU the way every gpusel worker
does, then says which card it is on. Run it under gpusel run, torchrun, srun or mpirun (or alone:
GPU 0)."""

import os

import gpusel

device = gpusel.bind_assigned_gpu()  # a torch.device with a CUDA-enabled torch, else the ordinal
ordinal = getattr(device, "index", device)
gpu = gpusel.gpu_identity(ordinal)
source, local_rank = gpusel.assignment_source()
print(f"rank {os.environ.get('RANK', '0')}: CUDA device {ordinal}, {gpu['uuid']} ({gpu['name']}), "
      f"chosen by {source}")
