"""The SMU's mailbox: silent until the PSP has loaded the SMU's firmware, then answering the driver's messages
(smu_cmn.c's protocol) against the SMU model; a driver that skips a step of the protocol meets the model's rule."""
import pytest
from drivers.amd import psp, smu
from drivers.mock.amd.pci_gpu import NAVI31_IPS
from drivers.mock.amd import smu as model_smu
from tests.drivers.amd.test_psp import STAGING, TMR, ring_of, started_gpu

MP1 = next(bases[0] for name, _, bases in NAVI31_IPS.values() if name == "MP1")

def gpu_with_smu_firmware():
  gpu, model = started_gpu()
  ring = ring_of(gpu)
  ring.load_ip_firmware(psp.GFX_FW_TYPE_SMU, STAGING, b"smu image" * 4)
  ring.setup_tmr(TMR, 4 << 20)
  return gpu, model

def test_the_smu_is_silent_until_its_firmware_is_loaded():
  gpu, model = started_gpu()
  with pytest.raises(smu.SMUError, match="previous message before 0x2: MP1_SMN_C2PMSG_90 reads 0"): smu.send(gpu, MP1, smu.GET_SMU_VERSION, wait_s=0.05)

def test_messages_are_answered_once_it_runs():
  gpu, model = gpu_with_smu_firmware()
  v = model_smu.VERSION
  assert smu.version(gpu, MP1) == (v >> 16 & 0xFF, v >> 8 & 0xFF, v & 0xFF)
  assert smu.send(gpu, MP1, smu.TEST_MESSAGE, 41) == 42
  assert model.smu.messages == [(smu.GET_SMU_VERSION, 0), (smu.TEST_MESSAGE, 41)] and model.smu.fault is None

def test_an_unknown_message_names_the_smus_answer():
  gpu, model = gpu_with_smu_firmware()
  with pytest.raises(smu.SMUError, match="answered message 0x60 with 0xfe \\(unknown message\\)"): smu.send(gpu, MP1, 0x60)

def test_a_driver_that_does_not_clear_the_response_is_caught():
  gpu, model = gpu_with_smu_firmware()
  smu.send(gpu, MP1, smu.TEST_MESSAGE, 1)
  gpu.reg_write(MP1 + smu.MSG, smu.TEST_MESSAGE)  # a wrong driver: the message without clearing C2PMSG_90 first
  assert "without clearing C2PMSG_90" in model.smu.fault and model.smu.messages == [(smu.TEST_MESSAGE, 1)]
