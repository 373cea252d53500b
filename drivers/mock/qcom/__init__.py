"""The Qualcomm Adreno (KGSL) model: the kgsl device file, the command processor and the ir3 shader core."""
