//! The `llm-doctor` binary: parse arguments, run the command, map the outcome to an exit code
//! (0 healthy, 1 problems found, 2 usage or input error).

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;
use llm_doctor::cli::{self, Cli};

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    match cli::run(cli) {
        Ok(outcome) => {
            let mut stdout = std::io::stdout().lock();
            // A closed pipe (`| head`) is not an error worth a message.
            if let Err(e) = stdout
                .write_all(outcome.stdout.as_bytes())
                .and_then(|_| stdout.flush())
            {
                if e.kind() != std::io::ErrorKind::BrokenPipe {
                    eprintln!("error: writing output: {e}");
                    return ExitCode::from(2);
                }
            }
            ExitCode::from(outcome.code)
        }
        Err(e) => {
            let msg = format!("{e:#}");
            if msg.starts_with("error") {
                eprintln!("{msg}");
            } else {
                eprintln!("error: {msg}");
            }
            ExitCode::from(2)
        }
    }
}
