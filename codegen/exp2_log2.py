"""The float32 exp2 and log2 the LLVM renderer builds for CPUs from multiply-adds: LLVM has no vector form of either
for x86 or ARM and calls libm's exp2f and log2f once per lane (16 calls for an AVX-512 vector, spilling the registers
around each), which made a 4096 x 4096 softmax take three times PyTorch's time.

exp2 x = 2**n * 2**f with n = round(x) and |f| <= 1/2 (f exact), 2**f = 1 + f P(f). log2 x = e + log2 m with
m in [sqrt(1/2), sqrt(2)), and with f = m - 1 (exact): log2(1 + f) = f log2(e) + f**2 T(f), log2(e) in two floats so
that the leading term keeps its low bits. P and T were fitted on their intervals (relative error, Lawson's weighted
least squares at 4000 Chebyshev nodes, toward the minimax polynomial) and rounded to float32: P within 1.1e-8 and T
within 7.5e-9 of the functions they stand for. Evaluated in float32 with fused multiply-adds, exp2 comes within 0.85
ulp and log2 within 1 ulp of the exact values (tests/codegen/test_cpu_transcendentals.py)."""
import math
from codegen.sine import round_f32

EXP2_POLY = (0.6931471824645996, 0.24022649228572845, 0.05550357326865196, 0.009618237614631653, 0.0013390735257416964,
             0.00015403507859446108)
LOG2_POLY = (-0.7213475108146667, 0.4808982014656067, -0.3606737554073334, 0.2885599732398987, -0.24047008156776428,
             0.20533329248428345, -0.17904917895793915, 0.17023608088493347, -0.16753916442394257, 0.09902993589639664)
LOG2_E = (round_f32(1 / math.log(2)), round_f32(1 / math.log(2) - round_f32(1 / math.log(2))))

# adding 1.5 * 2**23 rounds a float of magnitude under 2**22 to an integer (ties to even), which the sum's low bits hold
ROUNDING_SHIFTER = 12582912.0
ROUNDING_SHIFTER_BITS = 0x4B400000
# 2**x is inf from x = 128 and rounds to 0 below x = -150: clamped to these, the scale 2**n splits into two normal floats
EXP2_MIN, EXP2_MAX = -151.0, 128.0
