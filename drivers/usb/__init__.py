"""USB-attached PCIe: the ASMedia ASM24xx USB-to-PCIe bridge driven through pyusb (bulk-only transport of its vendor
SCSI commands), so a GPU in an external enclosure can be reached from userspace."""
