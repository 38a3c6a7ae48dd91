// Exact fractions of BigInts, for the retry budget's arithmetic ("at most ratio * first
// attempts" must hold to the unit, with no rounding of 0.1 * n either way).

/** The exact value of a finite double x >= 0 as [numerator, denominator]. */
export function exactFraction(x) {
  if (!Number.isFinite(x) || x < 0) throw new RangeError(`not a finite number >= 0: ${x}`);
  let d = 1n;
  // Doubling a double is exact; at most 1074 doublings make any finite one whole.
  while (!Number.isInteger(x)) {
    x *= 2;
    d *= 2n;
  }
  return reduce(BigInt(x), d);
}

function gcd(a, b) {
  while (b) [a, b] = [b, a % b];
  return a;
}

function reduce(n, d) {
  const g = gcd(n, d) || 1n;
  return [n / g, d / g];
}

/**
 * The fraction closest to n/d (n, d >= 0 BigInts, d > 0) whose denominator is at most
 * `maxDen`, as [numerator, denominator]: the continued fraction of n/d cut where the next
 * convergent's denominator would pass maxDen, then the better of that convergent and the
 * last semiconvergent that fits. (Python's Fraction.limit_denominator gives the same.)
 */
export function limitDenominator([n, d], maxDen = 1000000n) {
  if (d <= maxDen) return [n, d];
  let [p0, q0, p1, q1] = [0n, 1n, 1n, 0n];
  let [a0, b0] = [n, d];
  for (;;) {
    const a = a0 / b0;
    const q2 = q0 + a * q1;
    if (q2 > maxDen) break;
    [p0, q0, p1, q1] = [p1, q1, p0 + a * p1, q2];
    [a0, b0] = [b0, a0 - a * b0];
  }
  const k = (maxDen - q0) / q1;
  const [sp, sq] = [p0 + k * p1, q0 + k * q1];
  // |n/d - p1/q1| <= |n/d - sp/sq|, both sides over d*q1*sq, without signs: compare
  // |n*q1 - p1*d| * sq with |n*sq - sp*d| * q1.
  const abs = (v) => (v < 0n ? -v : v);
  const e1 = abs(n * q1 - p1 * d) * sq;
  const e2 = abs(n * sq - sp * d) * q1;
  return e1 <= e2 ? reduce(p1, q1) : reduce(sp, sq);
}
