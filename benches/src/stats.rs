//! Medians, percentiles, ratios against a floor measured in the same round,
//! and the shuffling that interleaves variants.

use std::collections::BTreeMap;

/// xorshift64*: enough to shuffle the order of variants; not for secrets.
#[derive(Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next() % n }
    }

    /// Fisher-Yates.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = (self.next() % (i as u64 + 1)) as usize;
            items.swap(i, j);
        }
    }
}

/// The median of some values (the mean of the middle two for an even count).
pub fn median(values: &[f64]) -> f64 {
    percentile(values, 50.0)
}

/// A percentile with linear interpolation between closest ranks.
pub fn percentile(values: &[f64], p: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = p / 100.0 * (v.len() - 1) as f64;
    let (lo, hi) = (rank.floor() as usize, rank.ceil() as usize);
    v[lo] + (v[hi] - v[lo]) * (rank - lo as f64)
}

/// Measurements of every variant, round by round.
///
/// Each round stores one figure per variant (a per-operation time, or the
/// median of that round's samples) plus, for latency measurements, every
/// sample. Ratios are taken within a round, against the floor of that same
/// round, and the table shows the median of those per-round ratios: a noisy
/// neighbour that slows one round slows the floor too.
#[derive(Debug, Default)]
pub struct Results {
    rounds: Vec<BTreeMap<String, f64>>,
    samples: BTreeMap<String, Vec<f64>>,
    extra: BTreeMap<String, Vec<f64>>,
}

impl Results {
    pub fn start_round(&mut self) {
        self.rounds.push(BTreeMap::new());
    }

    /// Records this round's figure for `name`.
    pub fn record(&mut self, name: &str, value: f64) {
        self.rounds
            .last_mut()
            .expect("a round was started")
            .insert(name.to_owned(), value);
    }

    /// Records this round's samples for `name` (their median becomes its
    /// figure for the round) and keeps them for percentiles.
    pub fn record_samples(&mut self, name: &str, samples: &[f64]) {
        self.record(name, median(samples));
        self.samples
            .entry(name.to_owned())
            .or_default()
            .extend_from_slice(samples);
    }

    /// A measurement that is not part of the rounds (peak RSS, CPU use).
    pub fn record_extra(&mut self, name: &str, value: f64) {
        self.extra.entry(name.to_owned()).or_default().push(value);
    }

    pub fn has(&self, name: &str) -> bool {
        self.rounds.iter().any(|r| r.contains_key(name))
    }

    /// The median over rounds of the per-round figures.
    pub fn median(&self, name: &str) -> f64 {
        let v: Vec<f64> = self
            .rounds
            .iter()
            .filter_map(|r| r.get(name))
            .copied()
            .collect();
        median(&v)
    }

    /// A percentile over every sample of every round.
    pub fn sample_percentile(&self, name: &str, p: f64) -> f64 {
        self.samples
            .get(name)
            .map_or(f64::NAN, |s| percentile(s, p))
    }

    pub fn sample_count(&self, name: &str) -> usize {
        self.samples.get(name).map_or(0, Vec::len)
    }

    /// The median over rounds of `name / floor`, each round against its own
    /// floor.
    pub fn ratio(&self, name: &str, floor: &str) -> f64 {
        let v: Vec<f64> = self
            .rounds
            .iter()
            .filter_map(|r| Some(r.get(name)? / r.get(floor)?))
            .collect();
        median(&v)
    }

    pub fn extra_median(&self, name: &str) -> f64 {
        self.extra.get(name).map_or(f64::NAN, |v| median(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_interpolate() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(percentile(&[1.0, 2.0, 3.0, 4.0, 5.0], 100.0), 5.0);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn ratios_are_taken_within_a_round() {
        let mut r = Results::default();
        for (floor, ours) in [(1.0, 2.0), (10.0, 15.0), (2.0, 3.0)] {
            r.start_round();
            r.record("floor", floor);
            r.record("ours", ours);
        }
        assert_eq!(r.ratio("ours", "floor"), 1.5);
        assert_eq!(r.median("ours"), 3.0);
    }

    #[test]
    fn shuffles_are_permutations() {
        let mut v: Vec<u32> = (0..10).collect();
        Rng::new(7).shuffle(&mut v);
        let mut sorted = v.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..10).collect::<Vec<_>>());
    }
}
