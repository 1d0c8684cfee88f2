//! `--once-per` and `--tick-offset`, shared by `run` and `check`.

use std::time::{Duration, Instant};

use clap::Args;
use lockfile::tick::{Schedule, TickClaim};

use super::duration;

/// `--once-per`: at most one finished run per scheduled time, shared by
/// `run` and `check`.
#[derive(Debug, Default, Args)]
pub struct TickArgs {
    /// At most one finished run per tick of this period (1m, 15m, 1h, 1d…:
    /// it must divide a day or be whole days), across every host that runs
    /// the job: a run whose tick (the scheduled time nearest its start)
    /// already ran is skipped. Ticks are in UTC from the Unix epoch.
    #[arg(long, value_name = "PERIOD", value_parser = duration::parse_positive)]
    pub once_per: Option<Duration>,

    /// With --once-per: the ticks fall this long after each multiple of the
    /// period (for `5 * * * *`, --once-per 1h --tick-offset 5m).
    #[arg(long, value_name = "OFFSET", requires = "once_per", value_parser = duration::parse)]
    pub tick_offset: Option<Duration>,
}

impl TickArgs {
    /// The claim a run that started at `started` makes, or why the options
    /// make no schedule.
    pub fn claim(&self, started: Instant) -> Result<Option<TickClaim>, String> {
        Ok(self
            .schedule()?
            .map(|schedule| TickClaim::new(schedule, started)))
    }

    /// The schedule the options give, or why they make none.
    pub fn schedule(&self) -> Result<Option<Schedule>, String> {
        let Some(period) = self.once_per else {
            return Ok(None);
        };
        Schedule::new(period, self.tick_offset.unwrap_or(Duration::ZERO))
            .map(Some)
            .map_err(|e| e.to_string())
    }
}
