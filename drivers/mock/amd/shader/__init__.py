"""The shader core of the AMD model: decoders of the RDNA3 and CDNA3 instruction encodings into one Instruction
form (instruction.py), and an executor of waves over those instructions (dispatch.py is what the command
processor hands it)."""
