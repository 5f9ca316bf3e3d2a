//! The verifier's command line (clap derive): `template-verify`'s own, and the argument types
//! of the two commands the xtask offers too (`cargo xtask receipt verify`, `cargo xtask pin`),
//! which its `flags.rs` takes from here so the two binaries cannot drift apart.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::attestation::verify::{RequestedSigner, VerifyAttestationRequest};
use crate::consume::ConsumeRequest;
use crate::pin::{PinCommand, PinRequest};
use crate::receipt::verify::VerifyRequest;

/// Exit status 0 only for a valid, complete receipt; every rejection names its field.
#[derive(Debug, Args)]
pub struct ReceiptVerifyArgs {
    /// The receipt, named `receipt-<tag>-<sha256 of the file>.json`.
    pub file: PathBuf,
    /// Directory holding the release's artifact files (package.json, package-lock.json,
    /// inventory.json, Dockerfile, manifest.yaml, install-plan.js when the receipt records it,
    /// and each platform's sbom-<os>-<arch>.spdx.json), checked against the receipt's sha256s.
    #[arg(long)]
    pub artifacts: Option<PathBuf>,
    /// The release's `manifest.yaml` asset to judge the receipt by; the receipt must record
    /// its sha256. Default: `template-verify` takes `manifest.yaml` from `--artifacts DIR`
    /// (it has no manifest of its own); `cargo xtask` takes the checkout's
    /// template/manifest.yaml.
    #[arg(long, value_name = "FILE")]
    pub manifest: Option<PathBuf>,
    /// Also ask the registry the receipt names (after every offline check passed): the index
    /// fetched by digest must hash to it and list exactly the receipt's platform manifests,
    /// each manifest's config digest must be the recorded one, and the release tag must
    /// resolve to the index digest. Credentials: the docker config's entry for the
    /// receipt's registry host; XTASK_OCI_USERNAME/XTASK_OCI_PASSWORD only when that host is
    /// --credentials-registry (a receipt cannot pick where your password goes).
    #[arg(long)]
    pub check_registry: bool,
    /// The registry host (`ghcr.io`, `127.0.0.1:5000`) that XTASK_OCI_USERNAME/
    /// XTASK_OCI_PASSWORD are for; without it they are sent nowhere.
    #[arg(long, env = "XTASK_OCI_REGISTRY", value_name = "HOST")]
    pub credentials_registry: Option<String>,
    /// Print `{"file", "valid", "sha256", "release_tag", "reference", "complete",
    /// "problems": [{"field", "problem"}]}`.
    #[arg(long)]
    pub json: bool,
}

/// Rewrites only the `image:` line of the template definition, and only from a valid,
/// complete receipt that the registry confirms and that names the repository the template
/// already names; otherwise the file stays byte-for-byte unchanged and the exit is non-zero.
#[derive(Debug, Args)]
pub struct PinArgs {
    /// A release receipt (verified before anything is written).
    #[arg(long)]
    pub receipt: PathBuf,
    /// Release artifact files to check against the receipt, as for `receipt verify`.
    #[arg(long)]
    pub artifacts: Option<PathBuf>,
    /// The release's `manifest.yaml` asset, as for `receipt verify`.
    #[arg(long, value_name = "FILE")]
    pub manifest: Option<PathBuf>,
    /// The Sandbox0 template definition to rewrite.
    #[arg(long, default_value = template_formats::paths::TEMPLATE_DEFINITION)]
    pub template: PathBuf,
    /// Skip the registry check that pin runs by default (the one `receipt verify
    /// --check-registry` runs: index, platform manifests, configs and tag as the receipt
    /// says). Only for a machine without access to the registry, after that check passed
    /// elsewhere on this same receipt file.
    #[arg(long)]
    pub offline: bool,
    /// Pin a receipt whose registry or repository differs from the one the template's
    /// `image:` already names. Without it such a receipt is refused: the template's current
    /// repository is the trust anchor, and moving it is a decision, not a side effect.
    #[arg(long)]
    pub allow_repository_change: bool,
    /// Refuse a receipt whose npm inputs are not `verified` (`inputs.status`: its registry
    /// served no registry signatures, or the receipt predates the record), naming the release
    /// and the registry.
    #[arg(long)]
    pub require_verified_inputs: bool,
    /// Show the change, write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Print `{"template", "old", "new", "changed", "dry_run"}`.
    #[arg(long)]
    pub json: bool,
}

/// `template-verify`: the consumer's verifier, a static binary each release carries, so
/// another repository verifies and pins a release without Rust or this repository.
#[derive(Debug, Parser)]
#[command(
    name = "template-verify",
    about = "Verify a coding-agent template release and pin its image by digest",
    version
)]
pub struct VerifierCli {
    #[command(subcommand)]
    pub command: VerifierCommand,
}

#[derive(Debug, Subcommand)]
pub enum VerifierCommand {
    /// Take the newest complete release of a template repository, verify its attestations,
    /// receipt, assets and registry, and pin the template definition to it.
    Consume(ConsumeArgs),
    /// Verify a release receipt (as `cargo xtask receipt verify`).
    #[command(subcommand)]
    Receipt(VerifierReceiptCommand),
    /// Pin the template definition to a verified receipt (as `cargo xtask pin`).
    Pin(PinArgs),
    /// How fresh the template's pin is: its release and age, each package against npm's
    /// `latest` now, and a newer complete release that would move it (as `cargo xtask status`).
    Status(StatusArgs),
    /// Verify Sigstore attestations offline, against a trusted root file.
    #[command(subcommand)]
    Attestation(VerifierAttestationCommand),
}

#[derive(Debug, Subcommand)]
pub enum VerifierAttestationCommand {
    /// Verify an artifact's Sigstore bundle offline and judge who signed it.
    Verify(AttestationVerifyArgs),
}

/// Verifies a Sigstore bundle (or the JSON lines of several) for ARTIFACT against the trusted
/// root given, with nothing fetched: the signature (DSSE or message), the certificate chain to
/// the root's Fulcio CAs at each verified time, the transparency log inclusion when the root
/// lists a log (Sigstore's public-good instance) or an RFC 3161 timestamp when it does not
/// (GitHub's own instance), the certificate's SCT when the root lists CT logs, and that the
/// statement's subject (or the signed digest) is ARTIFACT. Then the signer: either exactly
/// --certificate-identity and --certificate-oidc-issuer, or the release policy of
/// --repository/--workflow/--source-ref, every claim byte-exact (subject alternative name,
/// build signer and build config all the workflow at the ref, the source repository and ref,
/// a GitHub-hosted runner, the commit when given, the statement's type, predicate type and
/// subject name and digest). Exit 0 only when one bundle passes everything; each refusal names
/// the claim that differs, expected and found. docs/attestations.md says more.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("signer").required(true).args(["certificate_identity", "repository"])))]
pub struct AttestationVerifyArgs {
    /// The artifact: a file, or its digest as `sha256:<hex>` or `sha512:<hex>`.
    pub artifact: String,
    /// The Sigstore bundle: one bundle JSON, or JSON lines of bundles (as
    /// `gh attestation download` writes them); one of them must pass.
    #[arg(long, value_name = "FILE")]
    pub bundle: PathBuf,
    /// The trusted root: one Sigstore trusted root JSON, or the JSON lines
    /// `gh attestation trusted-root` prints (Sigstore's public-good root and GitHub's). Required:
    /// this tool fetches no root (no TUF client) and carries no built-in copy.
    #[arg(long, value_name = "FILE")]
    pub trusted_root: PathBuf,
    /// The certificate's subject alternative name, exactly.
    #[arg(
        long,
        value_name = "URI",
        requires = "certificate_oidc_issuer",
        conflicts_with = "repository"
    )]
    pub certificate_identity: Option<String>,
    /// The certificate's OIDC issuer, exactly.
    #[arg(long, value_name = "URL", requires = "certificate_identity")]
    pub certificate_oidc_issuer: Option<String>,
    /// The release policy: the repository whose workflow signed, `owner/repo`, byte-exact.
    #[arg(long, value_name = "OWNER/REPO", requires_all = ["workflow", "source_ref"])]
    pub repository: Option<String>,
    /// The signing workflow, `.github/workflows/<file>`.
    #[arg(long, value_name = "PATH", requires = "repository")]
    pub workflow: Option<String>,
    /// The ref the workflow ran from, `refs/heads/<branch>`, byte-exact.
    #[arg(long, value_name = "REF", requires = "repository")]
    pub source_ref: Option<String>,
    /// The commit the workflow ran from (40 hex digits).
    #[arg(long, value_name = "SHA", requires = "repository")]
    pub source_commit: Option<String>,
    /// The repository's numeric id (GitHub's API `id`), compared with the certificate's.
    #[arg(long, value_name = "ID", requires = "repository")]
    pub repository_id: Option<String>,
    /// The owner's numeric id (GitHub's API `owner.id`), compared with the certificate's.
    #[arg(long, value_name = "ID", requires = "repository")]
    pub owner_id: Option<String>,
    /// The statement's subject name; default, with --repository, the artifact file's name
    /// (required for a digest).
    #[arg(long, value_name = "NAME")]
    pub subject_name: Option<String>,
    /// The statement's predicate type; default, with --repository,
    /// `https://slsa.dev/provenance/v1`; with --certificate-identity, any (and a message
    /// signature passes).
    #[arg(long, value_name = "URI")]
    pub predicate_type: Option<String>,
    /// Print `{"artifact", "digest", "bundle_file", "trusted_root", "accepted", "bundles":
    /// [{"bundle", "verified", "error", "instance", "evidence", "certificate",
    /// "predicate_type", "subject_names", "refusals": [{"claim", "expected", "found"}],
    /// "accepted"}]}`.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum VerifierReceiptCommand {
    /// Check a receipt: schema, forms, completeness, and optionally its artifacts and registry.
    Verify(ReceiptVerifyArgs),
}

/// Looks through the newest releases of `--repository` (through the GitHub CLI, `gh`, with
/// its usual GH_TOKEN): a release without a receipt, or whose attested receipt says it is
/// incomplete, is passed over; the first complete one is verified (every asset's attestation
/// by the release workflow, the receipt with its assets, the registry, the image's provenance
/// and SBOM attestations) and pinned. Anything wrong with that release stops the run, and the
/// template stays byte-for-byte as it was. Under GitHub Actions the result also goes to
/// $GITHUB_OUTPUT (changed, previous-image, image, release-tag, receipt, versions, summary)
/// and $GITHUB_STEP_SUMMARY.
#[derive(Debug, Args)]
pub struct ConsumeArgs {
    /// The template's GitHub repository, `owner/name`, whose releases are read.
    #[arg(long)]
    pub repository: String,
    /// The Sandbox0 template definition to pin.
    #[arg(long)]
    pub template: PathBuf,
    /// Where release assets are downloaded (created).
    #[arg(long, value_name = "DIR")]
    pub work_dir: PathBuf,
    /// The workflow whose attestations are trusted; default
    /// `<repository>/.github/workflows/update-template.yml`.
    #[arg(long, value_name = "OWNER/REPO/PATH")]
    pub signer_workflow: Option<String>,
    /// The ref every attestation's run must have come from; default
    /// `refs/heads/<default branch>`, the default branch as GitHub records it for
    /// `--repository` (`gh api repos/<repository>`). Attestations from any other ref (a copy
    /// of the workflow dispatched from a branch) or from a self-hosted runner are refused.
    #[arg(long, value_name = "REF")]
    pub source_ref: Option<String>,
    /// How many of the newest releases to look through for a complete one.
    #[arg(long, default_value_t = 20)]
    pub max_releases: usize,
    /// As for `pin`: allow a release whose repository differs from the template's current one.
    #[arg(long)]
    pub allow_repository_change: bool,
    /// As for `pin`: refuse the newest complete release when its npm inputs are not
    /// `verified` (no older release is taken instead).
    #[arg(long)]
    pub require_verified_inputs: bool,
    /// Verify everything, write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Print `{"changed", "previous_image", "image", "release_tag", "receipt", "versions",
    /// "passed_over"}`.
    #[arg(long)]
    pub json: bool,
}

/// Reads the template's `image:`, finds its release among the newest releases of
/// `--repository` (through the GitHub CLI, `gh`, each receipt and manifest attested as
/// `consume` requires and verified offline), and asks the npm registry for each of its
/// packages' `latest` now. Prints Markdown (also to $GITHUB_STEP_SUMMARY under GitHub Actions)
/// or `--json`. What could not be checked (GitHub or the registry unreachable, the release
/// not found) is listed, and is not an error: the exit status is 0 whenever the template was
/// read.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The template's GitHub repository, `owner/name`, whose releases are read.
    #[arg(long)]
    pub repository: String,
    /// The Sandbox0 template definition whose pin is judged.
    #[arg(long, default_value = template_formats::paths::TEMPLATE_DEFINITION)]
    pub template: PathBuf,
    /// Where release assets are downloaded (created); default a temporary directory.
    #[arg(long, value_name = "DIR")]
    pub work_dir: Option<PathBuf>,
    /// As for `consume`: the workflow whose attestations are trusted.
    #[arg(long, value_name = "OWNER/REPO/PATH")]
    pub signer_workflow: Option<String>,
    /// As for `consume`: the ref every attestation's run must have come from.
    #[arg(long, value_name = "REF")]
    pub source_ref: Option<String>,
    /// How many of the newest releases to look through for the pinned one.
    #[arg(long, default_value_t = 20)]
    pub max_releases: usize,
    /// The npm registry to ask for `latest`; default the one the pinned release was resolved
    /// against (its receipt's `resolver.registry`).
    #[arg(long, value_name = "URL")]
    pub registry: Option<String>,
    /// The clock the pin's age is measured with (RFC 3339); default now.
    #[arg(long, value_name = "RFC3339")]
    pub now: Option<chrono::DateTime<chrono::Utc>>,
    /// Print `{"template", "image", "pinned", "age_hours", "packages", "newer_release",
    /// "newer_release_moves", "up_to_date", "could_not_check"}`.
    #[arg(long)]
    pub json: bool,
}

// The conversions into the domain modules' own requests live here, at the edge, so no domain
// module knows clap or this file (a test in lib.rs keeps it so). `--manifest` is not carried:
// the binary turns it into the `ReceiptPolicy` before converting.

impl From<ReceiptVerifyArgs> for VerifyRequest {
    fn from(args: ReceiptVerifyArgs) -> VerifyRequest {
        VerifyRequest {
            file: args.file,
            artifacts: args.artifacts,
            check_registry: args.check_registry,
            credentials_registry: args.credentials_registry,
            json: args.json,
        }
    }
}

impl From<PinArgs> for PinCommand {
    fn from(args: PinArgs) -> PinCommand {
        PinCommand {
            request: PinRequest {
                receipt: args.receipt,
                artifacts: args.artifacts,
                template: args.template,
                offline: args.offline,
                allow_repository_change: args.allow_repository_change,
                require_verified_inputs: args.require_verified_inputs,
                dry_run: args.dry_run,
            },
            json: args.json,
        }
    }
}

impl From<AttestationVerifyArgs> for VerifyAttestationRequest {
    fn from(args: AttestationVerifyArgs) -> VerifyAttestationRequest {
        // clap's group and `requires` guarantee one complete signer form.
        let signer = match (args.certificate_identity, args.certificate_oidc_issuer) {
            (Some(identity), Some(issuer)) => RequestedSigner::Identity { identity, issuer },
            _ => RequestedSigner::Release {
                repository: args.repository.unwrap_or_default(),
                workflow: args.workflow.unwrap_or_default(),
                source_ref: args.source_ref.unwrap_or_default(),
                source_commit: args.source_commit,
                repository_id: args.repository_id,
                owner_id: args.owner_id,
            },
        };
        VerifyAttestationRequest {
            artifact: args.artifact,
            bundle: args.bundle,
            trusted_root: args.trusted_root,
            signer,
            subject_name: args.subject_name,
            predicate_type: args.predicate_type,
            json: args.json,
        }
    }
}

impl From<ConsumeArgs> for ConsumeRequest {
    fn from(args: ConsumeArgs) -> ConsumeRequest {
        ConsumeRequest {
            repository: args.repository,
            template: args.template,
            work_dir: args.work_dir,
            signer_workflow: args.signer_workflow,
            source_ref: args.source_ref,
            max_releases: args.max_releases,
            allow_repository_change: args.allow_repository_change,
            require_verified_inputs: args.require_verified_inputs,
            dry_run: args.dry_run,
            json: args.json,
        }
    }
}

impl From<StatusArgs> for crate::status::StatusRequest {
    fn from(args: StatusArgs) -> crate::status::StatusRequest {
        crate::status::StatusRequest {
            repository: args.repository,
            template: args.template,
            work_dir: args.work_dir,
            signer_workflow: args.signer_workflow,
            source_ref: args.source_ref,
            max_releases: args.max_releases,
            registry: args.registry,
            now: args.now,
            json: args.json,
        }
    }
}
