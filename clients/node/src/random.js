// A seeded random source, so that a backoff's draws (and a test's) can be replayed exactly.
// Math.random cannot be seeded; this is xoshiro128** (Blackman and Vigna), its state filled
// from the seed by splitmix32, giving doubles in [0, 1) with 53 random bits.

function splitmix32(seed) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x9e3779b9) >>> 0;
    let z = s;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
    return (z ^ (z >>> 16)) >>> 0;
  };
}

function rotl(x, k) {
  return ((x << k) | (x >>> (32 - k))) >>> 0;
}

/**
 * A function that returns uniform doubles in [0, 1), the same sequence for the same `seed`
 * (an integer; only its low 32 bits count). Pass it as a Backoff's `random`.
 */
export function seededRandom(seed) {
  if (!Number.isInteger(seed)) throw new TypeError(`seededRandom needs an integer seed (got ${seed})`);
  const next = splitmix32(seed);
  const s = [next(), next(), next(), next()];
  if ((s[0] | s[1] | s[2] | s[3]) === 0) s[0] = 1; // the one state xoshiro cannot leave
  const u32 = () => {
    const out = Math.imul(rotl(Math.imul(s[1], 5) >>> 0, 7), 9) >>> 0;
    const t = (s[1] << 9) >>> 0;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] = (s[2] ^ t) >>> 0;
    s[3] = rotl(s[3] >>> 0, 11);
    s[0] >>>= 0;
    s[1] >>>= 0;
    return out;
  };
  // 27 high bits and 26 more: a multiple of 2^-53 below 1.
  return () => ((u32() >>> 5) * 67108864 + (u32() >>> 6)) / 9007199254740992;
}
