//! The seeded generator of the run, bit for bit CPython's `random.Random` (MT19937 and the
//! methods the workload draws with: `random`, `getrandbits`, `uniform`, `randint`, `choice`,
//! `sample`, `shuffle`). `just chaos` was first written in Python; keeping its generator makes
//! `--seed N` name the same workload (object names, changes, kind changes, deletions, sleeps)
//! as the runs whose figures docs/reliability.md records, so figures stay comparable across
//! the port.

/// MT19937 state, seeded like CPython's `random.Random(int)`.
#[derive(Debug, Clone)]
pub struct PyRandom {
    mt: [u32; 624],
    index: usize,
}

impl PyRandom {
    /// `random.Random(seed)`: the seed's absolute value, as 32-bit words (least significant
    /// first), through `init_by_array`.
    pub fn new(seed: i64) -> Self {
        let n = seed.unsigned_abs();
        let key: Vec<u32> = if n >> 32 == 0 {
            vec![n as u32]
        } else {
            vec![n as u32, (n >> 32) as u32]
        };
        let mut r = Self::init_genrand(19_650_218);
        let (mut i, mut j) = (1usize, 0usize);
        for _ in 0..624.max(key.len()) {
            let prev = r.mt[i - 1] ^ (r.mt[i - 1] >> 30);
            r.mt[i] = (r.mt[i] ^ prev.wrapping_mul(1_664_525))
                .wrapping_add(key[j])
                .wrapping_add(j as u32);
            i += 1;
            j += 1;
            if i >= 624 {
                r.mt[0] = r.mt[623];
                i = 1;
            }
            if j >= key.len() {
                j = 0;
            }
        }
        for _ in 0..623 {
            let prev = r.mt[i - 1] ^ (r.mt[i - 1] >> 30);
            r.mt[i] = (r.mt[i] ^ prev.wrapping_mul(1_566_083_941)).wrapping_sub(i as u32);
            i += 1;
            if i >= 624 {
                r.mt[0] = r.mt[623];
                i = 1;
            }
        }
        r.mt[0] = 0x8000_0000;
        r
    }

    fn init_genrand(s: u32) -> Self {
        let mut mt = [0u32; 624];
        mt[0] = s;
        for i in 1..624 {
            mt[i] = 1_812_433_253u32
                .wrapping_mul(mt[i - 1] ^ (mt[i - 1] >> 30))
                .wrapping_add(i as u32);
        }
        Self { mt, index: 624 }
    }

    fn next_u32(&mut self) -> u32 {
        if self.index >= 624 {
            for k in 0..624 {
                let y = (self.mt[k] & 0x8000_0000) | (self.mt[(k + 1) % 624] & 0x7fff_ffff);
                let mag = if y & 1 == 1 { 0x9908_b0df } else { 0 };
                self.mt[k] = self.mt[(k + 397) % 624] ^ (y >> 1) ^ mag;
            }
            self.index = 0;
        }
        let mut y = self.mt[self.index];
        self.index += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }

    /// `random()`: a float in [0, 1) from 53 random bits.
    pub fn random(&mut self) -> f64 {
        let a = f64::from(self.next_u32() >> 5);
        let b = f64::from(self.next_u32() >> 6);
        (a * 67_108_864.0 + b) * (1.0 / 9_007_199_254_740_992.0)
    }

    /// `getrandbits(k)` for `1 <= k <= 32`.
    pub fn getrandbits(&mut self, k: u32) -> u32 {
        debug_assert!((1..=32).contains(&k));
        self.next_u32() >> (32 - k)
    }

    /// `_randbelow(n)`: uniform in `0..n` by rejection, `n > 0`.
    fn below(&mut self, n: usize) -> usize {
        let k = usize::BITS - n.leading_zeros();
        loop {
            let r = self.getrandbits(k) as usize;
            if r < n {
                return r;
            }
        }
    }

    /// `uniform(a, b)`.
    pub fn uniform(&mut self, a: f64, b: f64) -> f64 {
        a + (b - a) * self.random()
    }

    /// `randint(a, b)`, both ends included.
    pub fn randint(&mut self, a: u32, b: u32) -> u32 {
        a + self.below((b - a + 1) as usize) as u32
    }

    /// `choice(items)`; `items` must not be empty.
    pub fn choice<T: Clone>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())].clone()
    }

    /// `sample(population, k)`, `k <= population.len()`, with CPython's two strategies (a
    /// pool for small populations, a set of picked indices for large ones).
    pub fn sample<T: Clone>(&mut self, population: &[T], k: usize) -> Vec<T> {
        let n = population.len();
        assert!(k <= n, "sample larger than population");
        let mut setsize = 21usize;
        if k > 5 {
            let exp = ((k as f64 * 3.0).ln() / 4f64.ln()).ceil() as u32;
            setsize += 4usize.pow(exp);
        }
        if n <= setsize {
            let mut pool = population.to_vec();
            (0..k)
                .map(|i| {
                    let j = self.below(n - i);
                    let picked = pool[j].clone();
                    pool[j] = pool[n - i - 1].clone();
                    picked
                })
                .collect()
        } else {
            let mut selected = std::collections::HashSet::new();
            (0..k)
                .map(|_| {
                    let mut j = self.below(n);
                    while selected.contains(&j) {
                        j = self.below(n);
                    }
                    selected.insert(j);
                    population[j].clone()
                })
                .collect()
        }
    }

    /// `shuffle(items)` in place.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i + 1);
            items.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests {
    //! Expected values printed by CPython 3.11's `random` module.
    use super::*;

    #[test]
    fn floats_and_words_match_cpython() {
        let mut r = PyRandom::new(1);
        assert_eq!(
            [r.random(), r.random(), r.random()],
            [0.13436424411240122, 0.8474337369372327, 0.763774618976614]
        );
        let mut r = PyRandom::new(1);
        assert_eq!(
            [r.getrandbits(32), r.getrandbits(32), r.getrandbits(32)],
            [577090037, 2444712010, 3639700191]
        );
        assert_eq!(PyRandom::new(0).getrandbits(32), 3626764237);
        assert_eq!(PyRandom::new(12345678901).getrandbits(32), 4063089813);
    }

    #[test]
    fn methods_match_cpython() {
        let mut r = PyRandom::new(2);
        assert_eq!(r.uniform(2.0, 6.0), 5.8241370875569975);
        assert_eq!(r.randint(1, 999), 971);
        assert_eq!(r.choice(&["a", "b", "c"]), "a");
        let mut r = PyRandom::new(7);
        let pop: Vec<String> = (0..50).map(|i| format!("s-{i:03}")).collect();
        assert_eq!(r.sample(&pop, 3), ["s-020", "s-009", "s-025"]);
        assert_eq!(
            r.sample(&["watchdog", "heartbeat", "backup"], 2),
            ["backup", "watchdog"]
        );
        assert_eq!(
            r.sample(&pop, 7),
            [
                "s-004", "s-034", "s-006", "s-023", "s-037", "s-003", "s-032"
            ]
        );
        let mut x = [0, 1, 2, 3, 4, 5];
        r.shuffle(&mut x);
        assert_eq!(x, [3, 2, 5, 4, 0, 1]);
    }
}
