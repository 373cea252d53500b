"""Tests of drivers/qcom: the kgsl uapi, CP packet encoding, and the QCOM device on the MOCK kgsl model."""
