"""One check of an AMD GPU through tg's own driver over amdkfd (AMD): the checks and timings of scripts/gpu_check.py,
with matmul TFLOPS next to AMD's published peak where the GPU is one whose datasheet the table has. A KFD call that
fails names the ioctl, its errno and the model's or kernel's reason where one is given.

  python scripts/amd_check.py                       # a real GPU (RDNA3/RDNA4, CDNA3/CDNA4)
  DEV=MOCK+AMD python scripts/amd_check.py          # the software model (gfx1100): small sizes
  DEV=MOCK+AMD::gfx942 python scripts/amd_check.py  # the model as a CDNA3 GPU
Switches: N (matmul size for the timing, default 4096; 64 on the model), LAUNCHES (default 1000; 20 on the model),
COPY_MB (copy size, default 256; 1 on the model)."""
from __future__ import annotations
import os, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from tg import Device
from gpu_check import run
from script_help import exit_on_help

# dense peak TFLOPS (fp32 vector, fp16 on the matrix cores) from AMD's datasheets, by (arch, compute units):
# Radeon RX 7900 XTX (gfx1100, 96 CUs) and Instinct MI300X (gfx942, 304 CUs)
PEAK_TFLOPS = {("gfx1100", 96): {"fp32": 61.4, "fp16": 122.8}, ("gfx942", 304): {"fp32": 81.7, "fp16": 1307.4}}

def peak(dev: str, kind: str) -> float | None:
  node = Device[dev].node
  return PEAK_TFLOPS.get((Device[dev].arch, node.cus_per_xcc * node.xccs), {}).get(kind)

if __name__ == "__main__":
  exit_on_help(__doc__)
  run(["AMD"], peak)
