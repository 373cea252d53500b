"""The float32 sine the PTX, AMDGPU and IR3 renderers build from fused multiply-adds instead of a hardware sine whose
error is absolute (PTX sin.approx, AMDGPU v_sin, ir3's cat4 sin: most of the result near 0, all of it for tiny arguments): x = n pi/2 + r with
|r| <= pi/4, then +-sin r or +-cos r by n mod 4, each by a polynomial fitted here."""
import math, struct

def round_f32(x: float) -> float: return struct.unpack("<f", struct.pack("<f", x))[0]

# pi/2 split in three floats (Cody-Waite), each the float32 nearest what the ones before leave, so that the reduction
# x - n pi/2 keeps the low bits
HALF_PI = (round_f32(math.pi / 2), round_f32(math.pi / 2 - round_f32(math.pi / 2)))
HALF_PI += (round_f32(math.pi / 2 - HALF_PI[0] - HALF_PI[1]),)
# fitted on [-pi/4, pi/4] (Chebyshev nodes, relative least squares): sin r = r + r^3 (S0 + S1 r^2 + S2 r^4) within
# 0.7 ulp and cos r = 1 - r^2/2 + r^4 (C0 + C1 r^2 + C2 r^4) within 1.3 ulp, evaluated in float32 with fma
SIN_POLY = (-0.16666653752326965, 0.00833214819431305, -0.0001951392914634198)
COS_POLY = (0.04166664555668831, -0.0013887289678677917, 2.443057019263506e-05)
