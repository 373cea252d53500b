"""Software models of NVIDIA GPUs: the PTX reference interpreter."""
