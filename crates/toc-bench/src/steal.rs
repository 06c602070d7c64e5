//! How much of the machine a run had: the share of the CPUs' time the hypervisor gave to
//! other guests while a scenario ran (`steal` in `/proc/stat`). On a shared VM a neighbour's
//! load slows every figure of a scenario at once, the baselines measured at another moment
//! not; this figure says which scenarios ran in such a stretch.

/// The CPUs' time counters at one instant, in clock ticks: (stolen, all).
#[derive(Clone, Copy)]
pub(super) struct CpuTimes {
    stolen: u64,
    all: u64,
}

impl CpuTimes {
    /// Now, or `None` where `/proc/stat` cannot be read (not Linux).
    pub(super) fn now() -> Option<CpuTimes> {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        parse(stat.lines().next()?)
    }

    /// The stolen share of the time since `self`, in percent.
    pub(super) fn stolen_since(self, later: CpuTimes) -> Option<f64> {
        let all = later.all.checked_sub(self.all)?;
        let stolen = later.stolen.checked_sub(self.stolen)?;
        (all > 0).then(|| 100.0 * stolen as f64 / all as f64)
    }
}

/// The `cpu` line: user nice system idle iowait irq softirq steal (guest time is within user).
fn parse(line: &str) -> Option<CpuTimes> {
    let mut fields = line.split_whitespace();
    if fields.next()? != "cpu" {
        return None;
    }
    let ticks: Vec<u64> = fields
        .take(8)
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    (ticks.len() == 8).then(|| CpuTimes {
        stolen: ticks[7],
        all: ticks.iter().sum(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stolen_share_is_steal_over_every_counter_between_two_readings() {
        let before = parse("cpu  100 0 50 800 10 0 0 40 0 0").unwrap();
        let after = parse("cpu  150 0 60 900 10 0 0 80 0 0").unwrap();
        // 40 stolen ticks of 200.
        assert_eq!(before.stolen_since(after), Some(20.0));
        assert!(parse("cpu0 1 2 3 4 5 6 7 8").is_none());
        assert!(parse("cpu 1 2 3").is_none());
    }
}
