//! The consumer's verifier binaries (`template-verify`, `verify/src/main.rs`): their
//! asset names, and the check that a file offered as one really is a statically linked
//! executable for its platform, so a release never lists a binary its consumers cannot run.
//!
//! The check reads the ELF header and program headers only: a static executable has no
//! `PT_INTERP` (no dynamic loader to find), whatever else it carries (a static-pie has a
//! `PT_DYNAMIC` for its own relocations, and that is fine).

use std::io::Read;
use std::path::Path;

use anyhow::{bail, Context, Result};

use template_formats::model::receipt::VerifierRecord;
use template_formats::model::Platform;

/// The binary's name, as built (`cargo build --bin`).
pub const BINARY: &str = "template-verify";

/// Its asset name for `platform`: `template-verify-linux-amd64`.
pub fn verifier_file_name(platform: Platform) -> String {
    format!("{BINARY}-{}", platform.slug())
}

/// The platform whose asset name `name` is, if it is one.
pub fn platform_of_file_name(name: &str) -> Option<Platform> {
    Platform::ALL
        .into_iter()
        .find(|p| verifier_file_name(*p) == name)
}

const ELF_MAGIC: &[u8; 4] = b"\x7fELF";
const ELFCLASS64: u8 = 2;
const ELFDATA2LSB: u8 = 1;
const ET_EXEC: u16 = 2;
const ET_DYN: u16 = 3;
const PT_INTERP: u32 = 3;

fn elf_machine(platform: Platform) -> u16 {
    match platform {
        Platform::LinuxAmd64 => 62,  // EM_X86_64
        Platform::LinuxArm64 => 183, // EM_AARCH64
    }
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// Why `head` (the file's first bytes, enough to hold its program headers) is not a static
/// little-endian ELF64 executable for `platform`; `None` when it is.
pub fn binary_problem(head: &[u8], platform: Platform) -> Option<String> {
    if head.get(..4) != Some(ELF_MAGIC) {
        return Some("is not an ELF file".into());
    }
    if head.get(4) != Some(&ELFCLASS64) || head.get(5) != Some(&ELFDATA2LSB) {
        return Some("is not a little-endian 64-bit ELF file".into());
    }
    let truncated = || Some("has a truncated ELF header".to_string());
    let Some(kind) = u16_at(head, 16) else {
        return truncated();
    };
    if kind != ET_EXEC && kind != ET_DYN {
        return Some(format!("is an ELF file of type {kind}, not an executable"));
    }
    let Some(machine) = u16_at(head, 18) else {
        return truncated();
    };
    if machine != elf_machine(platform) {
        return Some(format!(
            "is built for ELF machine {machine}, not {platform} (machine {})",
            elf_machine(platform)
        ));
    }
    let (Some(phoff), Some(phentsize), Some(phnum)) =
        (u64_at(head, 32), u16_at(head, 54), u16_at(head, 56))
    else {
        return truncated();
    };
    for i in 0..u64::from(phnum) {
        let at = phoff + i * u64::from(phentsize);
        let Some(kind) = usize::try_from(at).ok().and_then(|at| u32_at(head, at)) else {
            return Some("has program headers beyond the bytes read".into());
        };
        if kind == PT_INTERP {
            return Some(
                "is dynamically linked (it names an interpreter): consumers need a static binary; \
                 build it for the musl target (scripts/build-verifiers.sh)"
                    .into(),
            );
        }
    }
    None
}

/// Reads `path` as the verifier for `platform` and records it: its fixed asset name, its
/// sha256. Errors name the file and what is wrong with it.
pub fn record(path: &Path, platform: Platform) -> Result<VerifierRecord> {
    let mut head = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(64 << 10).read_to_end(&mut head))
        .with_context(|| format!("cannot read the verifier binary {}", path.display()))?;
    if let Some(problem) = binary_problem(&head, platform) {
        bail!("{} {problem}", path.display());
    }
    let sha256 = template_formats::bounded_read::sha256_regular(
        path,
        template_formats::bounded_read::MAX_ARTIFACT_BYTES,
        "verifier binary",
    )?;
    Ok(VerifierRecord {
        platform,
        name: verifier_file_name(platform),
        sha256,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal ELF64 header for `machine` with one program header of type `ph_type`.
    fn elf(machine: u16, ph_type: u32) -> Vec<u8> {
        let mut b = vec![0u8; 64 + 56];
        b[..4].copy_from_slice(ELF_MAGIC);
        b[4] = ELFCLASS64;
        b[5] = ELFDATA2LSB;
        b[16..18].copy_from_slice(&ET_DYN.to_le_bytes());
        b[18..20].copy_from_slice(&machine.to_le_bytes());
        b[32..40].copy_from_slice(&64u64.to_le_bytes());
        b[54..56].copy_from_slice(&56u16.to_le_bytes());
        b[56..58].copy_from_slice(&1u16.to_le_bytes());
        b[64..68].copy_from_slice(&ph_type.to_le_bytes());
        b
    }

    #[test]
    fn static_binaries_for_the_platform_pass() {
        const PT_LOAD: u32 = 1;
        assert_eq!(
            binary_problem(&elf(62, PT_LOAD), Platform::LinuxAmd64),
            None
        );
        assert_eq!(
            binary_problem(&elf(183, PT_LOAD), Platform::LinuxArm64),
            None
        );
    }

    #[test]
    fn dynamic_foreign_or_non_elf_files_are_named() {
        let dynamic = binary_problem(&elf(62, PT_INTERP), Platform::LinuxAmd64).unwrap();
        assert!(dynamic.contains("dynamically linked"), "{dynamic}");
        let foreign = binary_problem(&elf(62, 1), Platform::LinuxArm64).unwrap();
        assert!(foreign.contains("linux/arm64"), "{foreign}");
        assert!(binary_problem(b"#!/bin/sh\n", Platform::LinuxAmd64).is_some());
        assert!(binary_problem(&elf(62, 1)[..40], Platform::LinuxAmd64).is_some());
    }

    #[test]
    fn the_binary_this_test_runs_in_is_judged_by_what_it_is() {
        // The test binary is a real ELF file of this machine: static or not, the judgement
        // must name the linking, never the format or the machine.
        let Some(host) = Platform::host() else { return };
        let me = std::env::current_exe().unwrap();
        let head: Vec<u8> = std::fs::read(&me)
            .unwrap()
            .into_iter()
            .take(64 << 10)
            .collect();
        if let Some(problem) = binary_problem(&head, host) {
            assert!(problem.contains("dynamically linked"), "{problem}");
        }
    }

    #[test]
    fn names_map_to_platforms_and_back() {
        for p in Platform::ALL {
            assert_eq!(platform_of_file_name(&verifier_file_name(p)), Some(p));
        }
        assert_eq!(
            verifier_file_name(Platform::LinuxArm64),
            "template-verify-linux-arm64"
        );
        assert_eq!(platform_of_file_name("template-verify-linux-riscv64"), None);
    }
}
