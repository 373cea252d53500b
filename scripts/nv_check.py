"""One check of an NVIDIA GPU through tg's own driver (NV) and through libcuda (CUDA): the checks and timings of
scripts/gpu_check.py, with matmul TFLOPS next to NVIDIA's published peak. An RM or UVM call that fails names its
parameters as sent and the status that came back.

  python scripts/nv_check.py                # a real GPU (NV and CUDA)
  DEV=MOCK+NV python scripts/nv_check.py    # the software model: small sizes, NV only
Switches: N (matmul size for the timing, default 4096; 64 on the model), LAUNCHES (default 1000; 20 on the model),
COPY_MB (copy size, default 256; 1 on the model)."""
from __future__ import annotations
import os, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from tg import Device
from gpu_check import ON_MODEL, run
from script_help import exit_on_help

# dense peak TFLOPS (fp32, fp16 on tensor cores) from NVIDIA's datasheets, by SM version: H100/H200 SXM for sm_90
PEAK_TFLOPS = {90: {"fp32": 67.0, "fp16": 989.0}, 89: {"fp32": 82.6, "fp16": 165.2}, 80: {"fp32": 19.5, "fp16": 312.0}}

def peak(dev: str, kind: str) -> float | None: return PEAK_TFLOPS.get(getattr(Device[dev], "sm", 0), {}).get(kind)

if __name__ == "__main__":
  exit_on_help(__doc__)
  run(["NV"] if ON_MODEL else ["NV", "CUDA"], peak)
