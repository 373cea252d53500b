"""The two ways a dispatch stops in the ir3 model: a shader that breaks an ISA rule (ShaderHazard, raised by the
decoder and the executor) and a memory access outside what the GPU may reach (GPUFault, raised by the memory model,
by local-memory accesses and by isam/stib.b against the descriptor state). Both are re-exported by ir3_execute."""
from __future__ import annotations

class ShaderHazard(Exception):
  """An ir3 program the hardware would run wrongly: a missing (sy)/(ss)/(jp), too few delay slots, a register beyond
  the footprint, an undecodable word. `pc` is the instruction index in the code."""
  def __init__(self, pc: int, message: str):
    super().__init__(f"ir3 pc {pc}: {message}")
    self.pc, self.message = pc, message

class GPUFault(Exception):
  """A load or store at `address` that no allocation (or no byte of workgroup-local memory) holds, or an image access
  the loaded descriptor state does not allow (`address`: the descriptor's or the image's)."""
  def __init__(self, address: int, message: str):
    super().__init__(f"GPU fault at {address:#x}: {message}")
    self.address, self.message = address, message
