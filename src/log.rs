//! What long runs log (`serve`, `record`), through `tracing`: each event is a message with
//! fields. `text` (the default) writes `key=value key=value: message` lines, as `logfmt` readers
//! and people scan them; `json` writes one JSON object per line (timestamp, level, fields,
//! message), what log stacks ingest.

use std::fmt;

use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// How a long run writes its log on stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// `key=value ...: message` lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// Sends this process's events to stderr in `format`. A second call keeps the first.
pub fn init(format: LogFormat) {
    let builder = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(tracing::Level::INFO);
    let _ = match format {
        LogFormat::Text => builder.event_format(KeyValueLine).try_init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .try_init(),
    };
}

/// `key=value key=value: message`; the message alone when there are no fields.
struct KeyValueLine;

impl<S, N> FormatEvent<S, N> for KeyValueLine
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut line = Line::default();
        event.record(&mut line);
        if line.fields.is_empty() {
            writeln!(writer, "{}", line.message)
        } else {
            writeln!(writer, "{}: {}", line.fields.join(" "), line.message)
        }
    }
}

/// One event's message and `key=value` fields, in the order they were written.
#[derive(Default)]
struct Line {
    message: String,
    fields: Vec<String>,
}

impl Visit for Line {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message = value.to_string();
        } else {
            self.fields.push(format!("{}={value}", field.name()));
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "message" {
            self.message = format!("{value:?}");
        } else {
            self.fields.push(format!("{}={value:?}", field.name()));
        }
    }
}
