"""Stand-in for a training script that knows nothing of gpusel and uses cuda:LOCAL_RANK: opens CUDA
device LOCAL_RANK through the driver (the simulated one in the documentation's test), and fails,
as PyTorch would, when there is no such device. Under gpusel run it also checks that the device is
the GPU gpusel assigned to this rank (GPUSEL_GPU)."""

import ctypes
import os
import sys

cuda = ctypes.CDLL("libcuda.so.1")
rank = int(os.environ.get("LOCAL_RANK", "0"))
count = ctypes.c_int(0)
if cuda.cuInit(0) != 0 or cuda.cuDeviceGetCount(ctypes.byref(count)) != 0:
    sys.exit("plain_train.py: CUDA could not be initialised")
if rank >= count.value:
    sys.exit(f"plain_train.py: cuda:{rank} requested, but only {count.value} device(s) are visible")
device = ctypes.c_int(0)
raw = (ctypes.c_ubyte * 16)()
if cuda.cuDeviceGet(ctypes.byref(device), rank) != 0 or cuda.cuDeviceGetUuid_v2(raw, device) != 0:
    sys.exit(f"plain_train.py: cannot read cuda:{rank}")
h = bytes(raw).hex()
uuid = f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
wanted = os.environ.get("GPUSEL_GPU")
if wanted and uuid != wanted:
    sys.exit(f"plain_train.py: cuda:{rank} is {uuid}, but gpusel run assigned this rank {wanted}")
print(f"plain_train.py: rank {rank} on cuda:{rank} = {uuid}")
