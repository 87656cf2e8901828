//! The requested limits (`cpu_limit`, `memory_limit_mb`, `time_limit_sec`) against the policy's.

use crate::policy::Policy;
use crate::request::RequestLimits;
use crate::request::document::{Fields, Reasons, plain_scalar, scalar_str, show};

pub(super) fn limits(r: &mut Reasons, f: &Fields<'_>, policy: &Policy) -> Option<RequestLimits> {
    let mut int_limit = |key: &str, max: u64, unit: &str| -> Option<u64> {
        let (node, line) = f.require(key, r)?;
        let value = plain_scalar(node).and_then(|v| v.trim().parse::<i128>().ok());
        match value {
            None => {
                r.add(
                    "front_matter.type",
                    format!("`{key}` must be an integer, found {}", show(node)),
                    line,
                );
                None
            }
            Some(v) if v <= 0 => {
                r.add(
                    "limits.not_positive",
                    format!("`{key}` must be positive, found {v}"),
                    line,
                );
                None
            }
            Some(v) if v > i128::from(max) => {
                r.add(
                    "limits.over_maximum",
                    format!("`{key}` is {v} {unit}; the policy allows at most {max}"),
                    line,
                );
                None
            }
            Some(v) => u64::try_from(v).ok(),
        }
    };
    let memory = int_limit("memory_limit_mb", policy.limits.max_memory_limit_mb, "MB");
    let time = int_limit("time_limit_sec", policy.limits.max_time_limit_sec, "s");
    let cpu = match f.require("cpu_limit", r) {
        None => None,
        Some((node, line)) => match scalar_str(node).as_deref().and_then(parse_cpu_seconds) {
            None => {
                r.add(
                    "limits.cpu_limit_format",
                    format!(
                        "`cpu_limit` must be CPU seconds, such as \"30\" or \"2.5s\", found {}",
                        show(node)
                    ),
                    line,
                );
                None
            }
            Some(v) if v <= 0.0 => {
                r.add(
                    "limits.not_positive",
                    format!("`cpu_limit` must be positive, found {v}"),
                    line,
                );
                None
            }
            Some(v) if v > policy.limits.max_cpu_limit_sec as f64 => {
                r.add(
                    "limits.over_maximum",
                    format!(
                        "`cpu_limit` is {v} CPU seconds; the policy allows at most {}",
                        policy.limits.max_cpu_limit_sec
                    ),
                    line,
                );
                None
            }
            Some(v) => scalar_str(node).map(|text| (text, v)),
        },
    };
    match (memory, time, cpu) {
        (Some(memory_limit_mb), Some(time_limit_sec), Some((cpu_limit, cpu_limit_sec))) => {
            Some(RequestLimits {
                memory_limit_mb,
                time_limit_sec,
                cpu_limit,
                cpu_limit_sec,
            })
        }
        _ => None,
    }
}

/// `30`, `30s`, `2.5`, `2.5 sec`, `10 seconds` → CPU seconds.
pub fn parse_cpu_seconds(text: &str) -> Option<f64> {
    let t = text.trim().to_ascii_lowercase();
    let number = ["seconds", "second", "secs", "sec", "s"]
        .iter()
        .find_map(|unit| t.strip_suffix(unit))
        .unwrap_or(&t)
        .trim();
    if number.is_empty()
        || !number.chars().all(|c| c.is_ascii_digit() || c == '.')
        || number.matches('.').count() > 1
    {
        return None;
    }
    number.parse::<f64>().ok().filter(|v| v.is_finite())
}
