//! Link settings of the `lockfile` binary.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if pack_relative_relocations() {
        // The loader reads every relocation at every start, and these are
        // pages of the peak RSS that each `lockfile run` reports: packed
        // (DT_RELR), the relative ones take a few KiB instead of some 190 KiB
        // of RELA entries (see BENCHMARKS.md). The linker marks the binary
        // as needing glibc's GLIBC_ABI_DT_RELR, so that a glibc too old to
        // apply them refuses to load it rather than running it unrelocated.
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}

/// Whether the binary can ask for packed relative relocations: a native
/// build for Linux with glibc 2.36 or later, the first to apply them. The
/// glibc checked is the build machine's, which a native build links against;
/// a cross build keeps the classic relocations, since the target's glibc is
/// not known here.
fn pack_relative_relocations() -> bool {
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    if var("CARGO_CFG_TARGET_OS") != "linux"
        || var("CARGO_CFG_TARGET_ENV") != "gnu"
        || var("TARGET") != var("HOST")
    {
        return false;
    }
    host_glibc().is_some_and(|version| version >= (2, 36))
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn host_glibc() -> Option<(u32, u32)> {
    unsafe extern "C" {
        fn gnu_get_libc_version() -> *const std::ffi::c_char;
    }
    // SAFETY: gnu_get_libc_version takes nothing and returns a static
    // NUL-terminated string.
    let version = unsafe { std::ffi::CStr::from_ptr(gnu_get_libc_version()) };
    let mut parts = version.to_str().ok()?.split('.');
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn host_glibc() -> Option<(u32, u32)> {
    None
}
