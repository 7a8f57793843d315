"""The documentation's train.py, as far as the simulator can run it: binds this process's GPU the way
the real script does (gpusel.bind_assigned_gpu()), checks that it is the GPU gpusel run assigned
(GPUSEL_GPU, when set), and prints it. The training loop itself needs a real GPU."""

import os
import sys

import gpusel

device = gpusel.bind_assigned_gpu()
ordinal = getattr(device, "index", device)
gpu = gpusel.gpu_identity(ordinal)
rank = os.environ.get("RANK", "0")
wanted = os.environ.get("GPUSEL_GPU")
if wanted and gpu["uuid"] != wanted:
    sys.exit(f"train.py: rank {rank} bound {gpu['uuid']}, but gpusel run assigned it {wanted}")
print(f"train.py: rank {rank} on CUDA device {ordinal}, {gpu['uuid']}")
