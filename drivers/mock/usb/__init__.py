"""Software models of USB devices for pyusb (a pyusb backend), so the real pyusb code path of tg's USB drivers runs
in tests: the ASM24xx USB-to-PCIe bridge and the PCI function behind it."""
