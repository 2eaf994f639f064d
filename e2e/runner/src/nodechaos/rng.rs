//! A small seeded generator (SplitMix64): the same seed gives the same order of faults, the
//! same waves of changes and the same delays, on any machine.

#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`; the modulo bias is irrelevant at these sizes).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// Fisher-Yates.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = usize::try_from(self.below(i as u64 + 1)).unwrap_or(0);
            items.swap(i, j);
        }
    }

    /// `k` distinct indexes of `0..n`, sorted.
    pub fn pick(&mut self, n: usize, k: usize) -> Vec<usize> {
        let mut all: Vec<usize> = (0..n).collect();
        self.shuffle(&mut all);
        all.truncate(k.min(n));
        all.sort_unstable();
        all
    }

    /// Milliseconds in `lo..=hi`.
    pub fn millis(&mut self, lo: u64, hi: u64) -> std::time::Duration {
        std::time::Duration::from_millis(lo + self.below(hi.saturating_sub(lo) + 1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_draws() {
        let (mut a, mut b) = (Rng::new(3), Rng::new(3));
        let xs: Vec<u64> = (0..5).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..5).map(|_| b.next_u64()).collect();
        assert_eq!(xs, ys);
        assert_ne!(Rng::new(4).next_u64(), xs[0]);
    }

    #[test]
    fn picks_are_distinct_and_in_range() {
        let mut r = Rng::new(1);
        for _ in 0..50 {
            let p = r.pick(10, 4);
            assert_eq!(p.len(), 4);
            assert!(p.windows(2).all(|w| w[0] < w[1]) && p[3] < 10);
        }
        assert_eq!(r.pick(3, 9), [0, 1, 2]);
        let d = r.millis(100, 200).as_millis();
        assert!((100..=200).contains(&d));
    }
}
