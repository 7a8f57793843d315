"""The documentation's my_launcher.py: a program that asks NVML itself (through ctypes) how many GPUs
there are, as a launcher of your own might."""

import ctypes
import sys

nvml = ctypes.CDLL("libnvidia-ml.so.1")
count = ctypes.c_uint(0)
if nvml.nvmlInit_v2() != 0 or nvml.nvmlDeviceGetCount_v2(ctypes.byref(count)) != 0:
    sys.exit("my_launcher.py: NVML could not be initialised")
print(f"my_launcher.py: {count.value} GPUs")
nvml.nvmlShutdown()
