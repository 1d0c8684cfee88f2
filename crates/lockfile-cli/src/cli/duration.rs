//! Durations on the command line: plain seconds, as flock(1) takes them
//! (`-w 0.5`), or a human duration (`90s`, `45m`, `2h`, `1h30m`).

use std::time::Duration;

/// The help of every subcommand that takes a DURATION.
pub const DURATIONS: &str = "A DURATION is seconds (fractional allowed: 0.5) or a duration with units, such as 90s, 45m, 2h or 1h30m.";

/// Seconds (fractional allowed) or a human duration. Zero is allowed.
pub fn parse(s: &str) -> Result<Duration, String> {
    // A bare number is seconds; anything else must carry its units.
    if let Ok(secs) = s.parse::<f64>() {
        return Duration::try_from_secs_f64(secs).map_err(|_| {
            format!("`{s}` is not a duration: a number of seconds must be finite and not negative")
        });
    }
    humantime::parse_duration(s).map_err(|e| {
        format!(
            "`{s}` is not a duration ({e}): give seconds, such as `90` or `0.5`, \
             or a duration such as `90s`, `45m`, `2h` or `1h30m`"
        )
    })
}

/// As [`parse`], refusing zero.
pub fn parse_positive(s: &str) -> Result<Duration, String> {
    match parse(s)? {
        Duration::ZERO => Err(format!(
            "`{s}` is zero: the duration must be greater than zero"
        )),
        d => Ok(d),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: u64 = 60;
    const HOUR: u64 = 60 * MINUTE;

    #[test]
    fn plain_numbers_are_seconds_and_may_be_fractional() {
        assert_eq!(parse("1.5"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse("0"), Ok(Duration::ZERO));
        assert_eq!(parse("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse("0.001"), Ok(Duration::from_millis(1)));
        assert_eq!(parse("1e3"), Ok(Duration::from_secs(1000)));
    }

    #[test]
    fn human_durations_carry_their_units() {
        for (input, secs) in [
            ("90s", 90),
            ("45m", 45 * MINUTE),
            ("2h", 2 * HOUR),
            ("1h30m", HOUR + 30 * MINUTE),
            ("1h 30m", HOUR + 30 * MINUTE),
            ("1d", 24 * HOUR),
            ("0s", 0),
        ] {
            assert_eq!(parse(input), Ok(Duration::from_secs(secs)), "{input}");
        }
        assert_eq!(parse("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_positive("1h"), Ok(Duration::from_secs(HOUR)));
    }

    #[test]
    fn nonsense_is_refused_with_a_message_naming_it() {
        for input in [
            "soon", "-1", "-5m", "NaN", "inf", "1e400", "5x", "h", "1h30", "",
        ] {
            let err = parse(input).expect_err(input);
            assert!(
                err.starts_with(&format!("`{input}` is not a duration")),
                "{err}"
            );
        }
        let err = parse("soon").unwrap_err();
        assert!(
            err.contains("such as `90s`, `45m`, `2h` or `1h30m`"),
            "{err}"
        );
        let err = parse("5x").unwrap_err();
        assert!(err.contains(r#"unknown time unit "x""#), "{err}");
        let err = parse("-1").unwrap_err();
        assert!(err.contains("finite and not negative"), "{err}");
    }

    #[test]
    fn zero_is_refused_where_a_positive_duration_is_needed() {
        for input in ["0", "0s", "0.0", "0h0m"] {
            let err = parse_positive(input).expect_err(input);
            assert_eq!(
                err,
                format!("`{input}` is zero: the duration must be greater than zero")
            );
        }
        // What `parse` refuses, `parse_positive` refuses with the same words.
        assert_eq!(parse_positive("soon"), parse("soon"));
    }
}
