//! `lockfile postgres schema|init`: the PostgreSQL engine's tables, printed
//! for a DBA or created by a role that may. A run never creates them.

use crate::cli::PostgresCommand;

pub(crate) fn postgres(command: PostgresCommand) -> i32 {
    #[cfg(feature = "postgres")]
    {
        use crate::exit;
        use lockfile_postgres::schema;
        match command {
            PostgresCommand::Schema {
                postgres_schema,
                role,
            } => {
                // Both are pasted into the printed SQL: refuse what would
                // need quoting rather than print SQL that grants to
                // another role or runs what the name smuggles in.
                if let Err(e) = schema::check_schema(&postgres_schema)
                    .and_then(|()| role.as_deref().map_or(Ok(()), schema::check_role))
                {
                    errln!("lockfile: {e}");
                    return exit::USAGE;
                }
                outln!("{}", schema::ddl(&postgres_schema, None));
                // A GRANT to a role that does not exist stops the script
                // (`psql -v ON_ERROR_STOP=1`): grants only to a role named.
                match role {
                    Some(role) => {
                        outln!("-- What a role needs to run jobs (and nothing more):");
                        outln!("{}", schema::grants(&postgres_schema, &role));
                    }
                    None => {
                        let named = if postgres_schema == schema::DEFAULT_SCHEMA {
                            String::new()
                        } else {
                            format!(" --postgres-schema {postgres_schema}")
                        };
                        outln!(
                            "-- The grants a role needs to run jobs: lockfile postgres schema{named} --role ROLE"
                        );
                    }
                }
                exit::OK
            }
            PostgresCommand::Init {
                url,
                postgres_schema,
                history_days,
            } => {
                let mut engine = lockfile_postgres::LeaseOptions::new(url);
                engine.schema(postgres_schema);
                match engine.init(history_days) {
                    Ok(()) => exit::OK,
                    Err(e @ lockfile_postgres::Error::InvalidOptions { .. }) => {
                        errln!("lockfile: {e}");
                        exit::USAGE
                    }
                    Err(e) => {
                        errln!("lockfile: {e}");
                        exit::UNAVAILABLE
                    }
                }
            }
        }
    }
    #[cfg(not(feature = "postgres"))]
    {
        let _ = command;
        super::not_built("lockfile postgres", "postgres")
    }
}
