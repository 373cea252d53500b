"""The float32 sine the PTX, AMDGPU and IR3 renderers build from fused multiply-adds instead of a hardware sine whose
error is absolute (PTX sin.approx, AMDGPU v_sin, ir3's cat4 sin: most of the result near 0, all of it for tiny arguments),
and the CPU's LLVM renderer instead of libm's sinf called lane by lane: x = n pi/2 + r with |r| <= pi/4, then +-sin r
or +-cos r by n mod 4, each by a polynomial fitted here."""
import fractions, math, struct

def round_f32(x: float) -> float: return struct.unpack("<f", struct.pack("<f", x))[0]

PI_OVER_2 = fractions.Fraction("1.570796326794896619231321691639751442098584699687552910487")  # 58 digits

def pi_over_2_parts(bits: int) -> tuple[float, float, float]:
  """pi/2 split in three parts of `bits` significant bits (Cody-Waite), each the nearest to what the ones before leave,
  so that the reduction x - n pi/2 keeps the low bits; from PI_OVER_2 itself (math.pi is good to 53 bits only, which
  left float32 sines near multiples of pi 15 ulp off from |x| = 1e4)."""
  rest, parts = PI_OVER_2, []
  for _ in range(3):
    exp = math.frexp(float(rest))[1] - bits
    part = fractions.Fraction(round(rest / fractions.Fraction(2) ** exp)) * fractions.Fraction(2) ** exp
    parts.append(float(part))
    rest -= part
  return tuple(parts)

HALF_PI = pi_over_2_parts(24)  # float32 parts
# fitted on [-pi/4, pi/4] (Chebyshev nodes, relative least squares): sin r = r + r^3 (S0 + S1 r^2 + S2 r^4) within
# 0.7 ulp and cos r = 1 - r^2/2 + r^4 (C0 + C1 r^2 + C2 r^4) within 1.3 ulp, evaluated in float32 with fma
SIN_POLY = (-0.16666653752326965, 0.00833214819431305, -0.0001951392914634198)
COS_POLY = (0.04166664555668831, -0.0013887289678677917, 2.443057019263506e-05)
# beyond this |x| the float32 sine leaves 2 ulp (measured: 1.9 ulp up to 2**20, 6 ulp by 2**21): the product x * 2/pi
# rounds to n off by one, and r leaves the polynomials' interval
SIN_POLY_MAX = 2.0 ** 20
