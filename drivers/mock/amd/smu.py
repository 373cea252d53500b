"""The SMU's mailbox on MP1 (smu_v13_0_0_ppt.c: message C2PMSG_66, argument C2PMSG_82, response C2PMSG_90), as the
driver meets it after the PSP loaded the SMU's firmware. Rules from smu_cmn.c's side of it: the response register
is nonzero once the SMU is done with a message (__smu_cmn_poll_stat); a driver clears it before writing a new message
(__smu_cmn_send_msg); the SMU answers with smu_v13_0_0_ppsmc.h's result codes and leaves its reply in the argument
register (smu_cmn_read_arg). The model's own choices, not from a source: the response reads 0 until the SMU's
firmware runs, TestMessage replies with its argument + 1, and every message but TestMessage and GetSmuVersion is
answered 0xFE (unknown), since the model doesn't do what it asks."""
from __future__ import annotations

REG_MSG, REG_ARG, REG_RESPONSE = 0x282, 0x292, 0x29A
OK, UNKNOWN = 0x1, 0xFE
TEST_MESSAGE, GET_SMU_VERSION = 0x1, 0x2
VERSION = (0x4E << 16) | (0x41 << 8) | 0x00  # the firmware version the model reports (78.65.0)

class SMUModel:
  """`running()`: whether the SMU's firmware was loaded (the PSP model took a GFX_FW_TYPE_SMU image)."""
  def __init__(self, running):
    self.running = running
    self.regs = {REG_MSG: 0, REG_ARG: 0, REG_RESPONSE: 0}
    self.cleared = False  # the response register was written 0 since the last answer
    self.messages: list[tuple[int, int]] = []  # (message, argument) of each message answered
    self.fault: str | None = None

  def read(self, reg: int) -> int:
    if reg == REG_RESPONSE and not self.running(): return 0
    if reg == REG_RESPONSE and not self.messages and not self.cleared: return OK  # idle since its firmware started
    return self.regs[reg]

  def write(self, reg: int, value: int) -> None:
    if reg == REG_RESPONSE: self.cleared = value == 0
    if reg != REG_MSG or not self.running():
      self.regs[reg] = value
      return
    if not self.cleared:
      self.fault = self.fault or f"message {value:#x} sent without clearing C2PMSG_90: its answer can't be told from the last one"
      return
    self.cleared = False
    self.messages.append((value, self.regs[REG_ARG]))
    if value == GET_SMU_VERSION: self.regs[REG_ARG] = VERSION
    elif value == TEST_MESSAGE: self.regs[REG_ARG] = self.regs[REG_ARG] + 1
    self.regs[REG_RESPONSE] = OK if value in (TEST_MESSAGE, GET_SMU_VERSION) else UNKNOWN
