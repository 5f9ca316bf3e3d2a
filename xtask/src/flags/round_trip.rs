//! Every step a release phase, the dry run or a benchmark can hand to a child makes the round
//! trip: the request the phase decided, rendered as argv (`to_args`), parsed by this command
//! line and converted as `main` converts it, is the same request. A flag renamed on one side,
//! dropped from a rendering or read into another field fails here, not when that step runs in
//! a release. The steps come from the library (`xtask::every_step`), built by the
//! same functions the phases run.

use clap::{CommandFactory, FromArgMatches, Parser};
use xtask::every_step::{every_step, Emitted};
use xtask::release::steps::{ChildRequest, Step};

use super::{Cli, Command, ReceiptCommand};

/// The request `main` hands over for `command`, when it is one a phase runs as a child.
fn child_request(command: Command) -> Result<ChildRequest, String> {
    Ok(match command {
        Command::Gate(args) => ChildRequest::Gate(args.into()),
        Command::Resolve(args) => ChildRequest::Resolve(args.into()),
        Command::Lock(args) => ChildRequest::Lock(args.into()),
        Command::Base(args) => ChildRequest::Base(args.into()),
        Command::Build(args) => ChildRequest::Build(args.into()),
        Command::Smoke(args) => ChildRequest::Smoke(args.into()),
        Command::Sbom(args) => ChildRequest::Sbom(args.into()),
        Command::Publish(args) => ChildRequest::Publish(args.into()),
        Command::Receipt(ReceiptCommand::Write(args)) => ChildRequest::ReceiptWrite((*args).into()),
        Command::Receipt(ReceiptCommand::Verify(args)) => {
            // `main` turns `--manifest` into the policy, outside the verifier's request, so
            // the round trip could not compare it: no step may pass one.
            if let Some(manifest) = &args.manifest {
                return Err(format!(
                    "`receipt verify --manifest {}`: no step passes --manifest",
                    manifest.display()
                ));
            }
            ChildRequest::ReceiptVerify(args.into())
        }
        other => {
            return Err(format!(
                "{other:?} is not a command a phase runs as a child"
            ))
        }
    })
}

/// This command line without its environment fallbacks (`env = "XTASK_..."`), so a value a
/// rendering left out cannot come back from the test's own environment and pass by accident:
/// every value the request holds must be in the argv.
fn without_env(command: clap::Command) -> clap::Command {
    command
        .mut_args(|arg| arg.env(None::<&str>))
        .mut_subcommands(without_env)
}

/// The request `step`'s argv parses back into, or clap's error.
fn parsed_back(step: &Step) -> Result<ChildRequest, String> {
    let argv: Vec<&str> = std::iter::once("xtask")
        .chain(step.args.iter().map(String::as_str))
        .collect();
    let render = |e: clap::Error| e.render().to_string().trim_end().to_string();
    // The real parse, as the child runs it (with the environment's fallbacks).
    Cli::try_parse_from(&argv).map_err(render)?;
    let matches = without_env(Cli::command())
        .try_get_matches_from(&argv)
        .map_err(render)?;
    child_request(Cli::from_arg_matches(&matches).map_err(render)?.command)
}

/// What is wrong with `emitted`'s round trip, if anything.
fn round_trip_failure(emitted: &Emitted) -> Option<String> {
    let step = &emitted.step;
    let heading = format!(
        "step `{}` ({}): `{}`",
        step.name,
        emitted.variant,
        step.command_line()
    );
    match parsed_back(step) {
        Ok(request) if request == step.request => None,
        Ok(request) => Some(format!(
            "{heading}\nparses into\n{request:#?}\nnot the request it was rendered from\n{:#?}",
            step.request
        )),
        Err(error) => Some(format!("{heading}\n{error}")),
    }
}

#[test]
fn every_step_a_release_can_run_parses_with_the_real_command_line() {
    let all = every_step();
    let failures: Vec<String> = all.iter().filter_map(round_trip_failure).collect();
    assert!(
        failures.is_empty(),
        "{} of {} steps do not parse back into their request with flags.rs (fix the request's \
         to_args or the flag):\n\n{}",
        failures.len(),
        all.len(),
        failures.join("\n\n")
    );
}

/// The check itself: a step whose argv lost a flag, or names one the command line does not
/// have, is reported.
#[test]
fn a_step_whose_argv_drifted_from_its_request_is_reported() {
    let forced = every_step()
        .into_iter()
        .find(|e| e.step.args.iter().any(|a| a == "--force"))
        .expect("some gate step is forced");
    let mut dropped = Emitted {
        variant: forced.variant.clone(),
        step: forced.step.clone(),
    };
    dropped.step.args.retain(|a| a != "--force");
    let failure = round_trip_failure(&dropped).expect("a dropped --force is reported");
    assert!(
        failure.contains("not the request it was rendered from"),
        "{failure}"
    );

    let mut renamed = forced;
    for arg in &mut renamed.step.args {
        if arg == "--force" {
            *arg = "--forced".into();
        }
    }
    let failure = round_trip_failure(&renamed).expect("an unknown --forced is reported");
    assert!(failure.contains("--forced"), "{failure}");
}
