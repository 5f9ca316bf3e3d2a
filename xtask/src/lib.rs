//! The coding-agent template's release toolchain, for its maintainers and its workflow.
//! The binary (`main.rs`, `flags.rs`) parses the command line into each command's request and
//! dispatches; each folder below is one sub-domain. It builds on the file formats
//! (`template_formats`) and the consumer's verifier (`template_verify`), which know nothing
//! of it. See ARCHITECTURE.md for the map and the invariants between modules.

// Shared ground: the environment's settings, the checkout's layout, free space, small IO
// helpers. The command line is the binary's (main.rs, flags.rs).
#[cfg(test)]
mod architecture;
pub(crate) mod disk;
pub mod kill_point;
pub mod layout;
pub mod settings;
#[cfg(test)]
mod tidy;
pub mod util;

#[cfg(feature = "bench")]
pub mod bench;
#[cfg(feature = "test-support")]
pub mod every_step;
pub mod image;
pub mod npm;
pub(crate) mod oci;
pub mod release;

pub use template_verify::run_command;

/// What every command gets besides its request: the checkout's layout and the environment's
/// settings, both made once by `main.rs` (the only code that reads the process's environment
/// or decides where the repository is).
#[derive(Debug, Clone)]
pub struct Context {
    pub layout: layout::Layout,
    pub settings: settings::Settings,
}

impl Context {
    /// The context `settings` give (the layout they name).
    pub fn new(settings: settings::Settings) -> Context {
        Context {
            layout: layout::Layout::of(&settings),
            settings,
        }
    }

    /// The release clock: `flag` (`--now`), else `XTASK_NOW` (tests and reproductions),
    /// else the time.
    pub(crate) fn release_now(
        &self,
        flag: Option<&str>,
    ) -> anyhow::Result<chrono::DateTime<chrono::Utc>> {
        util::now_or(flag.or(self.settings.now.as_deref()))
    }
}
