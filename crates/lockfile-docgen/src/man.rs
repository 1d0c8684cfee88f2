//! The man page, lockfile(1): one page for the whole command, each
//! subcommand a subsection of COMMANDS with its synopsis and options, as
//! clap_mangen renders them from the definition, and the `flock`
//! personality's options from its own description.

use clap::{Command, CommandFactory};
use clap_mangen::Man;
use roff::{Roff, bold, italic, roman};

use crate::exit;

/// lockfile(1), in roff.
pub(crate) fn page() -> Vec<u8> {
    let mut cmd = with_visible_aliases(crate::cli::Cli::command());
    cmd.build();
    let man = Man::new(cmd.clone())
        .title("LOCKFILE")
        .manual("User Commands");
    let mut page = String::new();
    page += &render(|w| man.render_title(w));
    page += &render(|w| man.render_name_section(w));
    page += &render(|w| man.render_synopsis_section(w));
    page += &render(|w| man.render_description_section(w));
    page += &render(|w| man.render_options_section(w));

    let mut commands = Roff::new();
    commands.control("SH", ["COMMANDS"]);
    page += &commands.to_roff();
    for sub in cmd.get_subcommands() {
        if sub.is_hide_set() || sub.get_name() == "help" {
            continue;
        }
        // The global options are the page's OPTIONS, not each subcommand's.
        let sub = sub.clone().mut_args(|arg| {
            if arg.is_global_set() {
                arg.hide(true)
            } else {
                arg
            }
        });
        let mut heading = Roff::new();
        if sub.get_name() == "flock" {
            heading.control("SS", ["lockfile flock ARGS, or flock ARGS"]);
            page += &heading.to_roff();
            page += &subsection(&Man::new(sub), &[Part::Description]);
            // The personality parses its own command line: its synopsis and
            // options are in its description, which its `--help` prints.
            let flock = Man::new(crate::flock::command());
            page += &subsection(&flock, &[Part::Synopsis, Part::Options]);
        } else {
            heading.control("SS", [format!("lockfile {}", sub.get_name()).as_str()]);
            page += &heading.to_roff();
            page += &subsection(&Man::new(sub), &Part::ALL);
        }
    }
    page += &exit_status().to_roff();
    page += &see_also().to_roff();
    page += &render(|w| man.render_version_section(w));
    page.into_bytes()
}

/// A part of a subcommand's subsection.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Part {
    Synopsis,
    Description,
    Options,
    /// What `--help` prints after the options.
    Notes,
}

impl Part {
    const ALL: [Part; 4] = [
        Part::Synopsis,
        Part::Description,
        Part::Options,
        Part::Notes,
    ];
}

/// The `parts` of a subcommand, without their `.SH` headings, which would
/// end the COMMANDS section.
fn subsection(man: &Man, parts: &[Part]) -> String {
    let mut text = String::new();
    for part in parts {
        text += &paragraph(match part {
            Part::Synopsis => render(|w| man.render_synopsis_section(w)),
            Part::Description => render(|w| man.render_description_section(w)),
            Part::Options => render(|w| man.render_options_section(w)),
            Part::Notes => render(|w| man.render_extra_section(w)),
        });
    }
    text
}

/// A rendered section whose `.SH` heading lines become paragraph breaks.
fn paragraph(section: String) -> String {
    section
        .lines()
        .map(|line| {
            if line.starts_with(".SH ") {
                ".PP"
            } else {
                line
            }
        })
        .fold(String::new(), |text, line| text + line + "\n")
}

/// One of clap_mangen's renderings, as text.
fn render(f: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>) -> String {
    let mut out = Vec::new();
    f(&mut out).expect("writing to a Vec cannot fail");
    String::from_utf8(out).expect("clap_mangen writes UTF-8")
}

/// The definition, with each option's visible aliases in its description:
/// `--help` lists them (`[aliases: --nb, --nonblocking]`), and clap_mangen
/// would leave them out.
fn with_visible_aliases(cmd: Command) -> Command {
    let cmd = cmd.mut_args(|arg| {
        let shorts = arg.get_visible_short_aliases().unwrap_or_default();
        let longs = arg.get_visible_aliases().unwrap_or_default();
        let names: Vec<String> = (shorts.iter().map(|c| format!("-{c}")))
            .chain(longs.iter().map(|l| format!("--{l}")))
            .collect();
        if names.is_empty() {
            return arg;
        }
        let help = (arg.get_long_help().or(arg.get_help()))
            .map(ToString::to_string)
            .unwrap_or_default();
        arg.long_help(format!("{help} (also spelled {})", names.join(", ")))
    });
    let subcommands: Vec<String> = cmd
        .get_subcommands()
        .map(|sub| sub.get_name().to_owned())
        .collect();
    subcommands.iter().fold(cmd, |cmd, name| {
        cmd.mut_subcommand(name, with_visible_aliases)
    })
}

/// EXIT STATUS, from the command's own constants.
fn exit_status() -> Roff {
    let mut roff = Roff::new();
    roff.control("SH", ["EXIT STATUS"]);
    let mut item = |status: String, text: &str| {
        roff.control("TP", []);
        roff.text([bold(status)]);
        roff.text([roman(text)]);
    };
    item(
        "run".to_owned(),
        "COMMAND's own exit status, or 128+N when signal N ended it; otherwise:",
    );
    let run = [
        (
            i32::from(exit::CONFLICT),
            "the lock is held by someone else (EX_TEMPFAIL; -E N changes it)",
        ),
        (
            exit::CANNOT_LOCK,
            "the lock file cannot be opened, created, locked or written (EX_CANTCREAT)",
        ),
        (
            exit::UNAVAILABLE,
            "with a lease, its server could not be reached or refused the request (EX_UNAVAILABLE)",
        ),
        (
            exit::LEASE_LOST,
            "under a lease, the lease was lost or about to lapse while COMMAND ran",
        ),
        (
            exit::LIMIT,
            "COMMAND was stopped by --watchdog or --max-runtime",
        ),
        (
            exit::NOT_EXECUTABLE,
            "COMMAND was found but could not be executed",
        ),
        (exit::NOT_FOUND, "COMMAND was not found"),
        (
            exit::OS_ERROR,
            "an internal failure around COMMAND (EX_OSERR)",
        ),
    ];
    for (status, text) in run {
        item(format!("  {status}"), text);
    }
    item(
        "inspect, check".to_owned(),
        "as a monitoring plugin: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN.",
    );
    item(
        "beat".to_owned(),
        "1 when the lock's record is another run's.",
    );
    item(
        "flock".to_owned(),
        &format!(
            "as util-linux flock(1): 1 on a conflict or a timeout (or -E N), {} when the lock \
             file cannot be opened, {} when COMMAND cannot be executed, {} when the data \
             cannot be locked.",
            exit::NO_INPUT,
            exit::UNAVAILABLE,
            exit::DATA_ERROR
        ),
    );
    item(
        exit::USAGE.to_string(),
        "a usage error (EX_USAGE), for every subcommand.",
    );
    roff
}

/// SEE ALSO.
fn see_also() -> Roff {
    let mut roff = Roff::new();
    roff.control("SH", ["SEE ALSO"]);
    roff.text([
        bold("flock"),
        roman("(1), "),
        bold("flock"),
        roman("(2), "),
        bold("crontab"),
        roman("(5), "),
        bold("systemd.timer"),
        roman("(5)"),
    ]);
    roff.control("PP", []);
    roff.text([
        roman("The guide, the monitoring setup and the example units: "),
        italic("/usr/share/doc/lockfile/"),
        roman("."),
    ]);
    roff.control("PP", []);
    roff.text([
        roman("procmail's "),
        bold("lockfile"),
        roman(
            "(1) is another command of the same name; the Debian package of this one \
             conflicts with procmail.",
        ),
    ]);
    roff
}
