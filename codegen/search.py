"""BEAM search: grow sequences of optimization actions, keep the `width` fastest kernels each round (timed on the
real device by a caller-supplied function), stop when a round gains less than MIN_PROGRESS_S or MIN_PROGRESS of the
best time. Candidates stay within MAX_UPCAST and MAX_POSITIONS, or the heuristics' kernel's sizes where those are
larger. With BEAM_ESTIMATE, candidates are first ranked by a static cost estimate and only the most promising are
compiled and timed. The first beam holds the heuristics' choice and, unless the estimate puts it far behind, the
unoptimized kernel, so the search never returns something slower than the best of those it timed; a winner other than
the heuristics' kernel is timed against it again and must still beat it by MIN_PROGRESS. Results are cached
on disk per kernel, target, width and version of the code generator, so a second run pays nothing."""
from __future__ import annotations
import json, math
from typing import Callable
from ir.ops import Ops, ALU
from ir.switches import BEAM_ESTIMATE, DEBUG, TC
from ir.uop import UOp
from codegen import diskcache
from codegen.heuristic import hand_coded_optimizations
from codegen.kernel import AxisType, Kernel, KernelOptError, Opt, OptOps, VECTOR_SIZES
from codegen.program import lowered
from codegen.program_cache import code_digest
from codegen.renderer import Renderer

MAX_UPCAST, MAX_UNROLL, MAX_ROUNDS = 64, 32, 6
MAX_POSITIONS = 512  # upcast x unrolled positions in a loop body: lowering time grows with them (0.15-0.3 s past 4096)
MIN_PROGRESS_S = 10e-6  # what a round must gain on the best so far (less is within the timing noise of a launch)
MIN_PROGRESS = 0.02     # and as a fraction of it (less is within the timing noise of a longer kernel)
SEED_MARGIN = 2.0  # how much slower (timed or estimated) than the heuristics' kernel the unoptimized one may be and still be grown
REMATCH_ROUNDS = 3  # a winner other than the heuristics' kernel and that kernel are timed again this often, alternately

def candidate_actions(k: Kernel) -> list[Opt]:
  """Every action that could apply to kernel `k` in its current state."""
  out: list[Opt] = [Opt(OptOps.TC, i, 0) for i in range(len(k.tensor_core_matches()))] if TC and not k.applied_opts else []
  for a, (size, kind) in enumerate(zip(k.full_shape, k.axis_types)):
    if isinstance(size, UOp): continue  # no action splits an axis whose size is known only at run time
    if kind is AxisType.GLOBAL:
      out += [Opt(OptOps.UPCAST, a, amt) for amt in (2, 3, 4, 8, 16) if size % amt == 0 and size > amt]
      if k.splits_across_cores and a != k.axes_of(AxisType.GLOBAL)[0]: out.append(Opt(OptOps.THREAD, a, 0))
      if k.has_local: out += [Opt(OptOps.LOCAL, a, amt) for amt in (2, 4, 8, 16, 32) if size % amt == 0]
    if kind is AxisType.REDUCE:
      out += [Opt(OptOps.UNROLL, a, amt) for amt in (2, 4, 8) if size % amt == 0 and size > amt]
      if size <= 16: out.append(Opt(OptOps.UNROLL, a, 0))
      if k.has_local: out += [Opt(OptOps.GROUP, a, amt) for amt in (4, 8, 16, 32) if size % amt == 0]
    if kind in (AxisType.UPCAST, AxisType.UNROLL) and size in VECTOR_SIZES and k.vector_axis != a: out.append(Opt(OptOps.VECTORIZE, a, 0))
    if kind in (AxisType.GLOBAL, AxisType.REDUCE) and size > 8 and size % 8: out.append(Opt(OptOps.PADTO, a, 8))
  return out

def _positions(k: Kernel, kind: AxisType) -> int: return math.prod(s for s, t in zip(k.full_shape, k.axis_types) if t is kind)

def _kernel(ast: UOp, renderer: Renderer, opts: list[Opt], limits: tuple[int, int]) -> Kernel | None:
  """The kernel `opts` make, if they apply and it is within `limits` (upcast positions, upcast x unrolled positions)."""
  k = Kernel(ast, renderer)
  try:
    for o in opts: k.apply_opt(o)
  except KernelOptError: return None
  upcast, unroll = _positions(k, AxisType.UPCAST), _positions(k, AxisType.UNROLL)
  return k if upcast <= limits[0] and unroll <= MAX_UNROLL and upcast * unroll <= limits[1] else None

def estimate(uops: list[UOp]) -> float:
  """A static cost of a lowered kernel: ops executed, counting a vector op once, gathers lane by lane, and loop overhead."""
  cost, mult, stack = 0.0, 1, []
  for u in uops:
    if u.op is Ops.RANGE:
      stack.append(mult)
      mult *= max(u.src[1].vmax - u.src[0].vmin, 1)
      cost += mult
    elif u.op is Ops.ENDRANGE: mult = stack.pop()
    elif u.op in ALU: cost += mult
    elif u.op in (Ops.LOAD, Ops.STORE): cost += 2 * mult
    elif u.op is Ops.VECTORIZE: cost += mult * len(u.src)
  return cost

def encode_opts(opts: list[Opt]) -> bytes:
  """Actions as the disk cache stores them: JSON [[op name, axis, amount], ...]."""
  return json.dumps([[o.op.name, o.axis, o.amt] for o in opts]).encode()

def decode_opts(blob: bytes) -> list[Opt] | None:
  """What encode_opts wrote; None for anything else (the entry is then searched again)."""
  try: items = json.loads(blob)
  except (ValueError, RecursionError): return None
  ok = isinstance(items, list) and all(isinstance(i, list) and len(i) == 3 and isinstance(i[0], str) and i[0] in OptOps.__members__
                                       and all(type(v) is int for v in i[1:]) for i in items)
  return [Opt(OptOps[op], axis, amt) for op, axis, amt in items] if ok else None

def beam_key(cache_key: str, width: int, ast: UOp) -> str:
  """The disk cache's key of a search's result: a changed code generator (code_digest) searches again."""
  return diskcache.key_of("beam", code_digest(), cache_key, width, ast)

Candidate = tuple[list[Opt], Kernel, tuple | None]  # actions, the kernel they make, its lowering where the estimate made one

def _rematch(winner: tuple, heuristic: tuple, timed: Callable[[list[Opt]], float], prepare: Callable[[list[Candidate]], None]) -> tuple:
  """The search's winner, or the heuristics' kernel unless the winner beats it by MIN_PROGRESS again over REMATCH_ROUNDS
  alternate timings (the search times each candidate two or three times, so one lucky run can crown a kernel that is
  no faster: a 1024 matmul's BEAM kernel ran at 300-309 GFLOPS against the heuristics' 311-330)."""
  prepare([(*heuristic, None), (*winner[:2], None)])
  mine, theirs = math.inf, math.inf
  for _ in range(REMATCH_ROUNDS): theirs, mine = min(theirs, timed(heuristic[0])), min(mine, timed(winner[0]))
  return (winner[0], winner[1], mine) if mine < theirs - max(MIN_PROGRESS_S, MIN_PROGRESS * theirs) else (*heuristic, theirs)

def beam_search(ast: UOp, renderer: Renderer, time_opts: Callable[[list[Opt]], float], width: int, cache_key: str,
                prepare: Callable[[list[Candidate]], None] = lambda candidates: None,
                preview: Callable[[Candidate], None] = lambda candidate: None) -> list[Opt] | None:
  """The fastest action sequence found, or None when no candidate could be timed (the caller falls back). The seeds, and
  then each round's chosen candidates, go to `prepare` before the first is timed (the caller compiles them all). Each
  candidate lowered for the estimate goes to `preview` at once, so that the caller can start compiling it while the
  next ones are lowered."""
  key = beam_key(cache_key, width, ast)
  if (blob := diskcache.get("beam", key)) is not None and (hit := decode_opts(blob)) is not None: return hit
  def timed(opts: list[Opt]) -> float:
    try: return time_opts(opts)
    except Exception as e:
      if DEBUG >= 3: print(f"BEAM: candidate {opts} failed: {type(e).__name__}: {e}")
      return math.inf
  keep = max(3 * width, 4)  # candidates a round times, the cheapest by the estimate (besides loop-order changes)
  def always_timed(opts: list[Opt]) -> bool: return bool(opts) and opts[-1].op is OptOps.THREAD  # the estimate doesn't model caches
  def lowered_for_estimate(candidates: list[Candidate]) -> list[tuple[float, Candidate]]:
    """Each candidate lowered, with its estimate; each goes to `preview` at once, unless `keep` before it are estimated
    cheaper (it can't be chosen then)."""
    out: list[tuple[float, Candidate]] = []
    for opts, k, _ in candidates:
      candidate = (opts, k, lowered(k, renderer))
      cost = estimate(candidate[2][0])
      if always_timed(opts) or sum(c < cost for c, _ in out) < keep: preview(candidate)
      out.append((cost, candidate))
    return out
  def signature(k: Kernel) -> tuple: return (k.full_shape, tuple(k.axis_types), k.vector_axis)
  tuned = Kernel(ast, renderer)
  heuristic = hand_coded_optimizations(tuned, renderer.vector_width, renderer.vector_registers)
  seeds: list[Candidate] = [(heuristic, tuned, None)] + ([([], Kernel(ast, renderer), None)] if heuristic else [])
  if BEAM_ESTIMATE:
    estimated = lowered_for_estimate(seeds)
    seeds = [c for _, c in estimated]
    if len(seeds) == 2 and estimated[1][0] > SEED_MARGIN * estimated[0][0]:
      seeds = seeds[:1]  # the unoptimized kernel would take many times as long to time as it could be worth
  # the heuristics' kernel may be over the limits (AVX-512 tiles have 16 lanes x 16 positions) and is grown all the same
  upcast = _positions(tuned, AxisType.UPCAST)
  limits = (max(MAX_UPCAST, upcast), max(MAX_POSITIONS, upcast * _positions(tuned, AxisType.UNROLL)))
  seen = {signature(k) for _, k, _ in seeds}
  prepare(seeds)
  beam = sorted(((opts, k, timed(opts)) for opts, k, _ in seeds), key=lambda r: r[2])  # the heuristics' first: a far slower [] runs once
  best = beam[0]
  beam = [r for r in beam if r[2] <= SEED_MARGIN * best[2]]  # a seed far behind isn't grown
  for _ in range(MAX_ROUNDS):
    if best[2] < MIN_PROGRESS_S: break  # no round could gain enough to tell
    candidates: list[Candidate] = []
    for opts, base, _ in beam:
      for action in candidate_actions(base):
        if (k := _kernel(ast, renderer, opts + [action], limits)) is None or (sig := signature(k)) in seen: continue
        seen.add(sig)
        candidates.append((opts + [action], k, None))
    if not candidates: break
    if BEAM_ESTIMATE:
      ranked = [c for _, c in sorted(lowered_for_estimate(candidates), key=lambda e: e[0])]
      candidates = ranked[:keep] + [c for c in ranked[keep:] if always_timed(c[0])]
    prepare(candidates)
    results = sorted(((opts, k, timed(opts)) for opts, k, _ in candidates), key=lambda r: r[2])
    beam = [r for r in results[:width] if math.isfinite(r[2])]
    if DEBUG >= 2 and beam: print(f"BEAM: {len(candidates)} candidates, best {beam[0][2] * 1e6:.1f} us with {beam[0][0]}")
    if not beam or beam[0][2] > best[2] - max(MIN_PROGRESS_S, MIN_PROGRESS * best[2]): break
    best = beam[0]
  if not math.isfinite(best[2]): return None
  if best[0] != heuristic: best = _rematch(best, (heuristic, tuned), timed, prepare)
  diskcache.put("beam", key, encode_opts(best[0]))
  return best[0]
