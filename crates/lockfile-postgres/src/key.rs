//! How a lease name is shown as a key: the table and the row's name, so
//! that messages say where to look (`lockfile.leases/nightly`).

use crate::Result;

/// The key of the lease `name` in schema `schema`:
/// `SCHEMA.leases/NAME`. The name must pass
/// [`check_name`](lockfile_lease::name::check_name).
///
/// # Errors
///
/// [`Error::InvalidName`](crate::Error::InvalidName) saying what is wrong
/// with the name.
///
/// ```
/// assert_eq!(lockfile_postgres::key_for("lockfile", "nightly")?, "lockfile.leases/nightly");
/// assert!(lockfile_postgres::key_for("lockfile", "../x").is_err());
/// # Ok::<(), lockfile_postgres::Error>(())
/// ```
pub fn key_for(schema: &str, name: &str) -> Result<String> {
    lockfile_lease::name::check_name(name)?;
    Ok(format!("{}/{name}", table_key(schema)))
}

/// The key of the run history of `name`: `SCHEMA.history/NAME`.
///
/// # Errors
///
/// As [`key_for`].
pub fn history_key_for(schema: &str, name: &str) -> Result<String> {
    lockfile_lease::name::check_name(name)?;
    Ok(format!("{schema}.history/{name}"))
}

/// The lease table's key, for errors about every lease: `SCHEMA.leases`.
pub(crate) fn table_key(schema: &str) -> String {
    format!("{schema}.leases")
}
