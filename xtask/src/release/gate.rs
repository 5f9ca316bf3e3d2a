//! `cargo xtask gate`: does a scheduled run proceed today?
//!
//! The workflow's schedule fires every day; this gate lets a run through on UTC epoch days
//! (whole days since 1970-01-01 UTC) that are multiples of the manifest's
//! `cadence.interval_days`. Counting epoch days rather than days of the month means the rhythm
//! never resets at a month, year or leap-day boundary.
//!
//! Hosted schedulers drop runs now and then. When the previous release's receipt is given and
//! at least `interval_days` epoch days have passed since it was created, the run is due as a
//! catch-up, so the gap between two releases never exceeds the interval because of a dropped
//! run. `--force` (manual runs) proceeds any day and says so.
//!
//! [`decide`] is the whole policy, a pure function; `run` only reads its inputs and prints.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use chrono::{DateTime, NaiveDate, SubsecRound, Utc};

use crate::util::{now_or, print_json};
use template_formats::manifest::Manifest;
use template_formats::model::gate::{GateDecision, Trigger};
use template_verify::receipt::policy::ReceiptPolicy;

const SECONDS_PER_DAY: i64 = 86_400;

/// The UTC epoch day of an instant: whole days since 1970-01-01T00:00:00Z (floor, so instants
/// before 1970 get negative days rather than rounding towards zero).
pub(crate) fn epoch_day(t: DateTime<Utc>) -> i64 {
    t.timestamp().div_euclid(SECONDS_PER_DAY)
}

/// The calendar date of an epoch day.
pub(crate) fn date_of_epoch_day(day: i64) -> NaiveDate {
    DateTime::<Utc>::from_timestamp(day * SECONDS_PER_DAY, 0)
        .expect("epoch days of this era are representable")
        .date_naive()
}

/// The first cadence day strictly after `day`.
pub(crate) fn next_cadence_day(day: i64, interval_days: u32) -> i64 {
    let interval = i64::from(interval_days.max(1));
    (day.div_euclid(interval) + 1) * interval
}

/// The whole gate policy. `previous_created_at` is the previous release receipt's creation
/// time, when the caller has one.
pub(crate) fn decide(
    now: DateTime<Utc>,
    interval_days: u32,
    force: bool,
    previous_created_at: Option<DateTime<Utc>>,
) -> GateDecision {
    let interval = i64::from(interval_days.max(1));
    let today = epoch_day(now);
    let on_cadence = today.rem_euclid(interval) == 0;
    let days_since_previous = previous_created_at.map(|p| today - epoch_day(p));
    let catch_up = !on_cadence && days_since_previous.is_some_and(|d| d >= interval);
    let next = next_cadence_day(today, interval_days);
    let next_due = date_of_epoch_day(next).format("%Y-%m-%d").to_string();
    let today_date = date_of_epoch_day(today);

    let schedule_reason = if on_cadence {
        format!("epoch day {today} ({today_date}) is a multiple of the {interval}-day cadence")
    } else if catch_up {
        format!(
            "catch-up: the previous receipt is {} epoch days old, at least the {interval}-day \
             interval (a scheduled run was dropped)",
            days_since_previous.unwrap_or_default()
        )
    } else {
        let mut reason = format!(
            "epoch day {today} ({today_date}) is not a multiple of the {interval}-day cadence; \
             next due {next_due}"
        );
        match days_since_previous {
            Some(d) if d < 0 => reason.push_str(&format!(
                "; the previous receipt is dated {} days in the future (clock skew?) and was \
                 ignored",
                -d
            )),
            Some(d) => reason.push_str(&format!(
                "; the previous receipt is {d} epoch days old, less than the interval"
            )),
            None => {}
        }
        reason
    };
    let scheduled_due = on_cadence || catch_up;
    let (due, trigger, reason) = if force {
        let reason = if scheduled_due {
            format!("forced (it would have been due anyway: {schedule_reason})")
        } else {
            format!("forced by a maintainer (schedule alone: {schedule_reason})")
        };
        (true, Trigger::Forced, reason)
    } else {
        (scheduled_due, Trigger::Scheduled, schedule_reason)
    };
    GateDecision {
        due,
        epoch_day: today,
        next_due,
        forced: force,
        reason,
        trigger,
        catch_up: catch_up && !force,
        interval_days,
        now: now.trunc_subsecs(0),
        previous_created_at: previous_created_at.map(|p| p.trunc_subsecs(0)),
        days_since_previous,
    }
}

/// The lines appended to `$GITHUB_OUTPUT` for later workflow steps.
pub(crate) fn github_output_lines(decision: &GateDecision) -> String {
    format!(
        "due={}\nforced={}\ncatch_up={}\ntrigger={}\nepoch_day={}\nnext_due={}\n",
        decision.due,
        decision.forced,
        decision.catch_up,
        match decision.trigger {
            Trigger::Scheduled => "scheduled",
            Trigger::Forced => "forced",
        },
        decision.epoch_day,
        decision.next_due
    )
}

/// `cargo xtask gate`: the clock, whether to force, and the previous releases' receipts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateRequest {
    /// The clock (RFC 3339) instead of the time.
    pub now: Option<String>,
    /// Proceed whatever the day; the answer records that it was forced.
    pub force: bool,
    /// Receipts of previous releases: the newest that verifies is the previous release.
    pub previous_receipt: Vec<PathBuf>,
    pub json: bool,
}

impl GateRequest {
    /// This request as the command line that parses back into it (the release's steps run
    /// their children this way; a test in main.rs checks the round trip).
    pub fn to_args(&self) -> Vec<std::ffi::OsString> {
        crate::util::Argv::command(&["gate"])
            .switch("--json", self.json)
            .option("--now", self.now.as_ref())
            .switch("--force", self.force)
            .each("--previous-receipt", &self.previous_receipt)
            .into_vec()
    }
}

pub fn run(request: GateRequest, ctx: &crate::Context) -> Result<ExitCode> {
    let now = now_or(request.now.as_deref())?;
    let manifest = Manifest::load(&ctx.layout.manifest())?;
    // After re-runs or hand edits there may be several receipts: the newest that verifies is
    // the previous release; the others are named and ignored.
    let policy = ReceiptPolicy::checkout(&ctx.layout.manifest())?;
    let selection = crate::release::previous::newest_verified(&request.previous_receipt, &policy)?;
    for line in &selection.ignored {
        eprintln!("gate: {line}");
    }
    let previous = selection
        .newest
        .map(|p| {
            DateTime::parse_from_rfc3339(&p.receipt.created_at)
                .map(|t| t.with_timezone(&Utc))
                .with_context(|| {
                    format!(
                        "{}: `created_at` `{}` is not an RFC 3339 time",
                        p.path.display(),
                        p.receipt.created_at
                    )
                })
        })
        .transpose()?;
    let decision = decide(now, manifest.cadence.interval_days, request.force, previous);

    crate::util::append_to_github_file(
        &ctx.settings.verifier.github_output,
        &github_output_lines(&decision),
    )?;

    if request.json {
        print_json(&decision)?;
    } else {
        println!(
            "{}: {}",
            if decision.due { "due" } else { "not due" },
            decision.reason
        );
        println!("next cadence day: {}", decision.next_due);
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .unwrap()
            .with_timezone(&Utc)
    }

    /// The days in `[from, to]` on which an unforced run without a previous receipt is due.
    fn due_days(from: &str, to: &str, interval: u32) -> Vec<String> {
        let mut day = at(&format!("{from}T06:17:00Z"));
        let end = at(&format!("{to}T06:17:00Z"));
        let mut out = Vec::new();
        while day <= end {
            if decide(day, interval, false, None).due {
                out.push(day.format("%Y-%m-%d").to_string());
            }
            day += chrono::Duration::days(1);
        }
        out
    }

    #[test]
    fn epoch_day_is_whole_utc_days() {
        assert_eq!(epoch_day(at("1970-01-01T00:00:00Z")), 0);
        assert_eq!(epoch_day(at("1970-01-01T23:59:59Z")), 0);
        assert_eq!(epoch_day(at("1970-01-02T00:00:00Z")), 1);
        assert_eq!(epoch_day(at("1969-12-31T23:59:59Z")), -1);
        // An offset is converted to UTC first: 23:30 at -01:00 is the next UTC day.
        assert_eq!(
            epoch_day(at("2026-11-28T23:30:00-01:00")),
            epoch_day(at("2026-11-29T00:30:00Z"))
        );
        assert_eq!(epoch_day(at("2026-11-29T12:00:00Z")), 20_786);
    }

    #[test]
    fn rhythm_crosses_month_end_without_reset() {
        // `2026-11-29` is epoch day 20786 (20786 % 3 == 2); the cadence days around the end of
        // November are the 27th, the 30th and then 3 December, not the 1st.
        assert_eq!(
            due_days("2026-11-25", "2026-12-06", 3),
            ["2026-11-27", "2026-11-30", "2026-12-03", "2026-12-06"]
        );
    }

    #[test]
    fn rhythm_crosses_year_end_without_reset() {
        let days = due_days("2026-12-26", "2027-01-08", 3);
        assert_eq!(
            days,
            // 30 November is a cadence day and December has 31 days: 30 December, then
            // 2 January, not a restart on the 1st.
            [
                "2026-12-27",
                "2026-12-30",
                "2027-01-02",
                "2027-01-05",
                "2027-01-08"
            ]
        );
    }

    #[test]
    fn rhythm_crosses_leap_day() {
        // 2028 is a leap year: 29 February exists and counts as a day like any other.
        let days = due_days("2028-02-24", "2028-03-06", 3);
        assert_eq!(
            days,
            ["2028-02-26", "2028-02-29", "2028-03-03", "2028-03-06"]
        );
        // 2100 is not: 28 February is followed by 1 March.
        let days = due_days("2100-02-25", "2100-03-04", 3);
        assert!(days.windows(2).all(|w| {
            let a = NaiveDate::parse_from_str(&w[0], "%Y-%m-%d").unwrap();
            let b = NaiveDate::parse_from_str(&w[1], "%Y-%m-%d").unwrap();
            (b - a).num_days() == 3
        }));
        assert!(!days.iter().any(|d| d == "2100-02-29"));
    }

    #[test]
    fn gaps_are_exactly_the_interval_over_years() {
        for interval in [1, 2, 3, 7] {
            let days = due_days("2027-01-01", "2029-12-31", interval);
            for pair in days.windows(2) {
                let a = NaiveDate::parse_from_str(&pair[0], "%Y-%m-%d").unwrap();
                let b = NaiveDate::parse_from_str(&pair[1], "%Y-%m-%d").unwrap();
                assert_eq!((b - a).num_days(), i64::from(interval), "{pair:?}");
            }
        }
    }

    #[test]
    fn time_of_day_does_not_matter() {
        for time in ["00:00:00", "06:17:00", "23:59:59"] {
            assert!(decide(at(&format!("2026-11-30T{time}Z")), 3, false, None).due);
            assert!(!decide(at(&format!("2026-12-01T{time}Z")), 3, false, None).due);
        }
    }

    #[test]
    fn next_due_is_the_following_cadence_day() {
        let d = decide(at("2026-11-29T06:00:00Z"), 3, false, None);
        assert!(!d.due);
        assert_eq!(d.next_due, "2026-11-30");
        let d = decide(at("2026-11-30T06:00:00Z"), 3, false, None);
        assert!(d.due);
        assert_eq!(d.next_due, "2026-12-03");
        let d = decide(at("2026-12-31T06:00:00Z"), 3, false, None);
        assert_eq!(d.next_due, "2027-01-02");
        let d = decide(at("2028-02-27T06:00:00Z"), 3, false, None);
        assert_eq!(d.next_due, "2028-02-29");
        assert_eq!(d.epoch_day, epoch_day(at("2028-02-27T00:00:00Z")));
    }

    #[test]
    fn force_proceeds_any_day_and_says_so() {
        let d = decide(at("2026-12-01T10:00:00Z"), 3, true, None);
        assert!(d.due && d.forced);
        assert_eq!(d.trigger, Trigger::Forced);
        assert!(d.reason.starts_with("forced"), "{}", d.reason);
        let on_day = decide(at("2026-11-30T10:00:00Z"), 3, true, None);
        assert!(on_day.due && on_day.forced);
        assert!(on_day.reason.contains("anyway"), "{}", on_day.reason);
        let unforced = decide(at("2026-11-30T10:00:00Z"), 3, false, None);
        assert_eq!(unforced.trigger, Trigger::Scheduled);
        assert!(!unforced.forced);
    }

    #[test]
    fn dropped_run_is_caught_up() {
        // Released on the cadence day `2026-11-27`; the run of `2026-11-30` was dropped.
        let previous = Some(at("2026-11-27T06:40:00Z"));
        let d = decide(at("2026-12-01T06:17:00Z"), 3, false, previous);
        assert!(d.due && d.catch_up, "{d:?}");
        assert_eq!(d.days_since_previous, Some(4));
        assert!(d.reason.contains("catch-up"), "{}", d.reason);
        // Once caught up, the next day is not due again.
        let after = decide(
            at("2026-12-02T06:17:00Z"),
            3,
            false,
            Some(at("2026-12-01T06:30:00Z")),
        );
        assert!(!after.due && !after.catch_up, "{after:?}");
    }

    #[test]
    fn recent_previous_receipt_changes_nothing() {
        let previous = Some(at("2026-11-30T06:40:00Z"));
        let d = decide(at("2026-12-01T06:17:00Z"), 3, false, previous);
        assert!(!d.due);
        assert_eq!(d.days_since_previous, Some(1));
        // A cadence day is due whatever the previous receipt says.
        let d = decide(at("2026-12-03T06:17:00Z"), 3, false, previous);
        assert!(d.due && !d.catch_up);
    }

    #[test]
    fn catch_up_across_year_and_leap_day() {
        let d = decide(
            at("2029-01-02T01:00:00Z"),
            3,
            false,
            Some(at("2028-12-29T23:00:00Z")),
        );
        assert_eq!(d.days_since_previous, Some(4));
        assert!(d.due);
        let d = decide(
            at("2028-03-01T01:00:00Z"),
            3,
            false,
            Some(at("2028-02-27T23:00:00Z")),
        );
        // 27 Feb -> 1 Mar is three epoch days in a leap year (the 28th, the 29th, the 1st).
        assert_eq!(d.days_since_previous, Some(3));
    }

    #[test]
    fn previous_receipt_from_the_future_is_ignored() {
        let d = decide(
            at("2026-12-01T06:00:00Z"),
            3,
            false,
            Some(at("2026-12-09T06:00:00Z")),
        );
        assert!(!d.due);
        assert!(d.reason.contains("future"), "{}", d.reason);
    }

    #[test]
    fn github_output_has_due_line() {
        let d = decide(at("2026-11-30T06:00:00Z"), 3, false, None);
        let lines = github_output_lines(&d);
        assert!(lines.lines().any(|l| l == "due=true"), "{lines}");
        assert!(lines.lines().any(|l| l == "next_due=2026-12-03"), "{lines}");
        let d = decide(at("2026-12-01T06:00:00Z"), 3, false, None);
        assert!(github_output_lines(&d).lines().any(|l| l == "due=false"));
    }

    #[test]
    fn json_shape_has_the_contract_fields() {
        let d = decide(at("2026-11-30T06:00:00Z"), 3, false, None);
        let v = serde_json::to_value(&d).unwrap();
        for key in ["due", "epoch_day", "next_due", "forced", "reason"] {
            assert!(v.get(key).is_some(), "missing {key} in {v}");
        }
        assert_eq!(v["due"], true);
        assert_eq!(v["epoch_day"], 20_787);
        assert_eq!(v["trigger"], "scheduled");
    }
}
