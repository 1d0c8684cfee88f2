//! How figures are written in the tables: times in the unit that reads
//! best, ratios with the precision that means something, verdicts against a
//! target, and the machine line.

/// A time in nanoseconds, in the unit that reads best.
pub fn time(ns: f64) -> String {
    if ns.is_nan() {
        "n/a".to_owned()
    } else if ns < 1_000.0 {
        format!("{ns:.0} ns")
    } else if ns < 1_000_000.0 {
        format!("{:.2} µs", ns / 1e3)
    } else if ns < 1_000_000_000.0 {
        format!("{:.2} ms", ns / 1e6)
    } else {
        format!("{:.2} s", ns / 1e9)
    }
}

/// A ratio: two decimals below 10×, one above.
pub fn ratio(r: f64) -> String {
    if r.is_nan() {
        "n/a".to_owned()
    } else if r >= 10.0 {
        format!("{r:.1}×")
    } else {
        format!("{r:.2}×")
    }
}

/// "met" or "MISSED" for a figure that must not exceed its limit.
pub fn verdict(value: f64, limit: f64) -> &'static str {
    if value.is_nan() {
        "n/a"
    } else if value <= limit {
        "met"
    } else {
        "MISSED"
    }
}

/// "Linux 6.1.0 x86_64".
pub fn uname() -> String {
    let u = rustix::system::uname();
    format!(
        "{} {} {}",
        u.sysname().to_string_lossy(),
        u.release().to_string_lossy(),
        u.machine().to_string_lossy()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_pick_their_unit() {
        assert_eq!(time(512.0), "512 ns");
        assert_eq!(time(1_500.0), "1.50 µs");
        assert_eq!(time(2_500_000.0), "2.50 ms");
        assert_eq!(time(2e9), "2.00 s");
        assert_eq!(ratio(1.234), "1.23×");
        assert_eq!(ratio(12.34), "12.3×");
        assert_eq!(verdict(1.0, 1.2), "met");
        assert_eq!(verdict(1.3, 1.2), "MISSED");
    }
}
