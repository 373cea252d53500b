"""Messages to the SMU (the power-management firmware on MP1) through its mailbox, once the PSP has loaded its
firmware (smu_cmn.c smu_cmn_send_smc_msg_with_param; registers from smu_v13_0_0_ppt.c's mailbox, offsets from MP1's
base): wait for the previous answer in C2PMSG_90, clear it, write the argument to C2PMSG_82 and the message index
to C2PMSG_66, then wait for the answer; the SMU leaves its reply argument in C2PMSG_82."""
from __future__ import annotations
from drivers.amd.pci_gpu import wait_for

MSG, ARG, RESPONSE = 0x282, 0x292, 0x29A  # MP1 C2PMSG_66, C2PMSG_82, C2PMSG_90 (smu_v13_0_0_ppt.c)
# smu_v13_0_0_ppsmc.h: response codes and the messages tg sends
RESULTS = {0x1: "ok", 0xFF: "failed", 0xFE: "unknown message", 0xFD: "rejected: a prerequisite is missing", 0xFC: "rejected: busy"}
TEST_MESSAGE, GET_SMU_VERSION = 0x1, 0x2
WAIT_S = 1.0

class SMUError(RuntimeError):
  """The SMU didn't answer, or answered with an error: the message and what came back."""

def send(gpu, mp1: int, message: int, argument: int = 0, wait_s: float = WAIT_S) -> int:
  """Send `message` with `argument`; the SMU's reply argument."""
  _answer(gpu, mp1, f"the SMU to finish its previous message before {message:#x}", wait_s)
  gpu.reg_write(mp1 + RESPONSE, 0)
  gpu.reg_write(mp1 + ARG, argument)
  gpu.reg_write(mp1 + MSG, message)
  if (result := _answer(gpu, mp1, f"the SMU to answer message {message:#x}", wait_s)) != 0x1:
    raise SMUError(f"the SMU answered message {message:#x} with {result:#x} ({RESULTS.get(result, 'an unknown response')})")
  return gpu.reg_read(mp1 + ARG)

def version(gpu, mp1: int) -> tuple[int, int, int]:
  """The running SMU firmware's version (program major, minor, debug: smu_v13_0_check_fw_version's split)."""
  v = send(gpu, mp1, GET_SMU_VERSION)
  return v >> 16 & 0xFF, v >> 8 & 0xFF, v & 0xFF

def _answer(gpu, mp1: int, what: str, wait_s: float) -> int:
  answered, result = wait_for(lambda: gpu.reg_read(mp1 + RESPONSE), bool, wait_s)
  if not answered: raise SMUError(f"timed out after {wait_s} s waiting for {what}: MP1_SMN_C2PMSG_90 reads 0")
  return result
