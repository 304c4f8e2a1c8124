//! How much decompressed text one file may hold in memory. A small gzip file can expand to any
//! size (a gigabyte of zeros compresses to a megabyte), so whole-file reads stop at a limit and
//! name it, instead of being killed for memory; the streaming reader bounds its lines the same
//! way. Below both `read` and `stream`, which each need it.

/// A size limit in MiB from environment variable `var` (a positive number), else `default`.
/// Returns bytes and MiB.
pub fn mib_from_env(var: &str, default: f64) -> (u64, f64) {
    let mib = std::env::var(var)
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|v| v.is_finite() && *v > 0.0)
        .unwrap_or(default);
    ((mib * f64::from(1u32 << 20)) as u64, mib)
}

/// The most bytes a whole-file read holds: `LLM_DOCTOR_MAX_INPUT_MB` MiB, else 4096. Returns
/// bytes and MiB.
pub fn max_input() -> (u64, f64) {
    mib_from_env("LLM_DOCTOR_MAX_INPUT_MB", 4096.0)
}

/// The longest line the streaming reader holds while it looks for the line's end: 64 MiB, or
/// [`max_input`] when that is smaller. No exposition line is near that long.
pub fn max_line() -> (u64, f64) {
    let (bytes, mib) = max_input();
    if bytes < 64 << 20 {
        (bytes, mib)
    } else {
        (64 << 20, 64.0)
    }
}

/// The error for a text larger than `mib`.
pub fn too_large(name: &str, what: &str, mib: f64) -> anyhow::Error {
    anyhow::anyhow!(
        "`{name}`: {what} more than {mib} MiB, the limit for one input (LLM_DOCTOR_MAX_INPUT_MB raises it)"
    )
}
