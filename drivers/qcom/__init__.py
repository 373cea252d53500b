"""QCOM: Qualcomm Adreno a6xx/a7xx over kgsl (kgsl.py the uapi, cp.py the CP packets and registers, queues.py, device.py)."""
