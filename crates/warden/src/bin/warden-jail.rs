//! `warden-jail`: the jail's helper on its own, a small binary that `warden` starts instead of
//! re-executing itself when it sits beside it and is of the same build (see
//! `warden_jail::Jail::current_exe`). It only supervises jails for `warden`; run `warden`.

#![forbid(unsafe_code)]

use std::process::ExitCode;

fn main() -> ExitCode {
    match std::env::args_os().nth(1) {
        Some(a) if a == warden_jail::HELPER_ARG => {
            ExitCode::from(u8::try_from(warden_jail::helper_main()).unwrap_or(1))
        }
        Some(a) if a == "--build" => {
            println!("{}", warden_jail::BUILD);
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!("warden-jail: the sandbox helper of `warden`; it is not run by hand");
            ExitCode::from(2)
        }
    }
}
