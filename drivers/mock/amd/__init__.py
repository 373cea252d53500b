"""The AMD model: amdkfd (/dev/kfd, its topology in sysfs, the render node), the command processor's PM4 front end,
the SDMA engine, and a shader core that decodes and executes the RDNA3/CDNA3 machine code the driver loaded."""
