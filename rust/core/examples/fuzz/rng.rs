//! The PRNG and its edge-biased draws.

/// splitmix64: tiny, fast, and every 64-bit seed is a good one.
#[derive(Debug, Clone)]
pub struct Rng(pub u64);

impl Rng {
    /// The PRNG of iteration `iter` of seed `seed` (each iteration replays alone).
    pub fn for_iteration(seed: u64, iter: u64) -> Self {
        let mut r = Self(seed ^ iter.wrapping_mul(0xD134_2543_DE82_EF95));
        Self(r.next_u64())
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (0 when `n == 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// A uniform element of `xs` (non-empty).
    pub fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize]
    }

    /// An index into a slice of length `n` (non-zero).
    pub fn index(&mut self, n: usize) -> usize {
        self.below(n as u64) as usize
    }

    pub fn u64_edge(&mut self) -> u64 {
        match self.below(8) {
            0..=3 => self.pick(&U64_EDGES),
            4 => 1u64 << self.below(64),
            5 => (1u64 << self.below(64)).wrapping_add(self.pick(&[1, u64::MAX])),
            6 => self.next_u64() >> self.below(64),
            _ => self.next_u64(),
        }
    }

    pub fn i64_edge(&mut self) -> i64 {
        match self.below(6) {
            0..=2 => self.pick(&I64_EDGES),
            3 => -((self.next_u64() >> self.range(1, 63)) as i64),
            4 => (self.next_u64() >> self.range(1, 63)) as i64,
            _ => self.next_u64() as i64,
        }
    }

    /// An integer edge as a Python int: 64-bit edges of either sign, and a few beyond.
    pub fn int_edge(&mut self) -> i128 {
        match self.below(10) {
            0..=4 => i128::from(self.u64_edge()),
            5..=8 => i128::from(self.i64_edge()),
            _ => self.pick(&I128_EDGES),
        }
    }

    pub fn f64_edge(&mut self) -> f64 {
        match self.below(5) {
            0..=2 => self.pick(&F64_EDGES),
            3 => f64::from_bits(self.next_u64()),
            _ => (self.below(1 << 20) as f64 + 1.0) / f64::from(1u32 << 20),
        }
    }
}

const U64_EDGES: [u64; 31] = [
    0,
    1,
    2,
    3,
    7,
    8,
    31,
    32,
    33,
    64,
    255,
    256,
    4096,
    65_535,
    (1 << 31) - 1,
    1 << 31,
    (1 << 32) - 1,
    1 << 32,
    (1 << 32) + 1,
    (1 << 53) - 1,
    1 << 53,
    (1 << 53) + 1,
    1 << 62,
    (1 << 63) - 1,
    1 << 63,
    (1 << 63) + 1,
    u64::MAX - 1,
    u64::MAX,
    u64::MAX / 3,
    1_000_000_007,
    0x5555_5555_5555_5555,
];

const I64_EDGES: [i64; 22] = [
    0,
    1,
    -1,
    2,
    -2,
    63,
    64,
    65,
    i64::MIN,
    i64::MIN + 1,
    i64::MAX,
    i64::MAX - 1,
    1 << 31,
    -(1 << 31),
    1 << 32,
    (1 << 32) - 1,
    1 << 53,
    -(1 << 53),
    (1 << 53) + 1,
    1 << 62,
    -(1 << 62),
    i64::MAX / 3,
];

const I128_EDGES: [i128; 6] = [
    1 << 64,
    (1 << 64) + 1,
    -(1 << 63) - 1,
    -(1 << 64),
    i128::MAX,
    i128::MIN,
];

const F64_EDGES: [f64; 24] = [
    f64::NAN,
    f64::INFINITY,
    f64::NEG_INFINITY,
    0.0,
    -0.0,
    5e-324,
    f64::MIN_POSITIVE,
    f64::MIN_POSITIVE / 2.0,
    1e-300,
    1e300,
    f64::MAX,
    -f64::MAX,
    -1.0,
    1e-9,
    1e9,
    1e18,
    1e19,
    0.1,
    0.5,
    0.8,
    1.0,
    1.5,
    2.0,
    9_223_372_036_854_775_808.0,
];
