//! `lockfile run` as a flock(1) drop-in: a file that is not ours is locked
//! and left byte for byte as it was.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use common::{
    Dir, code, copy_executable, inspect_json, require_root, run_output, s, stderr, write_executable,
};
use lockfile_test_support::foreign::fingerprint;

#[test]
fn the_script_that_locks_itself_runs_under_its_own_lock_and_stays_byte_identical() {
    let dir = Dir::new();
    let script = dir.path("myjob.sh");
    let log = dir.path("log");
    let lockfile = env!("CARGO_BIN_EXE_lockfile");
    // flock(1)'s manual: the script re-executes itself under its own lock.
    write_executable(
        &script,
        &format!(
            "#!/bin/sh\n\
             [ \"${{FLOCKER}}\" != \"$0\" ] && exec env FLOCKER=\"$0\" {lockfile} run -n \"$0\" \"$0\" \"$@\" || :\n\
             echo \"locked run $*\" >> {log}\n\
             {lockfile} run -n \"$0\" true || echo \"excluded $?\" >> {log}\n",
            log = s(&log)
        ),
    );
    let before = fingerprint(&script);

    let out = std::process::Command::new(&script)
        .arg("one")
        .env_remove("FLOCKER")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(&log).unwrap(),
        "locked run one\nexcluded 75\n",
        "the script ran once, under its own lock"
    );
    assert_eq!(fingerprint(&script), before, "the script changed");
}

#[test]
fn a_text_lock_file_is_locked_without_a_record_and_left_unchanged() {
    let dir = Dir::new();
    let data = dir.path("data.lock");
    std::fs::write(&data, "text the user keeps here\n").unwrap();
    let before = fingerprint(&data);
    let probe = format!(
        "{} inspect --json {} > {}",
        env!("CARGO_BIN_EXE_lockfile"),
        s(&data),
        s(&dir.path("held.json"))
    );
    let out = run_output(&[
        "run",
        "--heartbeat",
        "0.05",
        s(&data),
        "sh",
        "-c",
        &format!("sleep 0.3; {probe}"),
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(fingerprint(&data), before, "the file changed");

    let held: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path("held.json")).unwrap()).unwrap();
    assert_eq!(held[0]["state"], "held");
    assert_eq!(held[0]["content"], "foreign");
    assert_eq!(held[0]["no_record"], "foreign_content");
    assert_eq!(held[0]["owner"], serde_json::Value::Null);
    assert_eq!(held[0]["findings"], serde_json::json!([]));

    let (status, free) = inspect_json(&data, &[]);
    assert_eq!(free[0]["state"], "debris");
    assert_eq!(free[0]["content"], "foreign");
    assert_eq!(status, 0, "nothing is wrong with it");
    // reap keeps it and says why.
    let out = run_output(&["reap", "--fix", s(dir.tmp.path())]);
    assert!(data.exists(), "{}", String::from_utf8_lossy(&out.stdout));
    assert_eq!(fingerprint(&data), before);
}

#[test]
#[ignore = "needs root: runs the command as another user (setpriv)"]
fn a_file_read_only_to_the_caller_is_locked_read_only_and_left_unchanged() {
    require_root("setpriv to an unprivileged uid");
    let dir = Dir::new();
    std::fs::set_permissions(dir.tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let lock = dir.path("job.lock");
    std::fs::write(&lock, "").unwrap();
    std::fs::set_permissions(&lock, std::fs::Permissions::from_mode(0o644)).unwrap();
    let before = fingerprint(&lock);
    // The second run is started by the unprivileged user itself, which may
    // not be able to reach the build's directory (a checkout in a private
    // temporary directory): it runs a link or copy in the test's own.
    let exe = dir.path("lockfile");
    copy_executable(Path::new(env!("CARGO_BIN_EXE_lockfile")), &exe);
    let out = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(&exe)
        .args(["run", "-n", s(&lock), "sh", "-c"])
        .arg(format!("{} run -n {} true; echo $?", s(&exe), s(&lock)))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "75\n",
        "the lock excluded a second run"
    );
    assert_eq!(fingerprint(&lock), before, "the file changed");
}

/// Our binary under the name `flock`, in a directory of the test's own.
fn our_flock(dir: &Dir) -> std::path::PathBuf {
    let link = dir.path("flock");
    if !link.exists() {
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_lockfile"), &link).unwrap();
    }
    link
}

/// Runs `flock ARGS` through util-linux flock(1) and through our `flock`
/// personality, with `lock` held (by flock(1)) for the duration when
/// `held`; returns both (status, stdout, stderr), the timing number of
/// `--verbose` blanked out.
fn side_by_side(dir: &Dir, args: &[&str], held: Option<&[&str]>) -> [(i32, String, String); 2] {
    let ours = our_flock(dir);
    let theirs = std::path::PathBuf::from("flock");
    [theirs, ours].map(|program| {
        let mut holder = held.map(|holder_args| {
            let ready = dir.path("holder-ready");
            let _ = std::fs::remove_file(&ready);
            let child = std::process::Command::new("flock")
                .args(holder_args)
                .args(["sh", "-c", &format!("touch {}; exec sleep 30", s(&ready))])
                .current_dir(dir.tmp.path())
                .spawn()
                .unwrap();
            let started = std::time::Instant::now();
            while !ready.exists() {
                assert!(started.elapsed().as_secs() < 20, "the holder did not start");
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            child
        });
        let out = std::process::Command::new(&program)
            .args(args)
            .current_dir(dir.tmp.path())
            .output()
            .unwrap();
        if let Some(h) = holder.as_mut() {
            // flock(1) and the sleep it execs through sh: one process.
            let _ = std::process::Command::new("pkill")
                .args(["-P", &h.id().to_string()])
                .status();
            let _ = h.kill();
            let _ = h.wait();
        }
        let blank = |text: &[u8]| {
            let text = String::from_utf8_lossy(text).into_owned();
            match text.find(" took ") {
                Some(at) => {
                    let end = text[at..].find(" seconds").map_or(text.len(), |e| at + e);
                    format!("{} took N{}", &text[..at], &text[end..])
                }
                None => text,
            }
        };
        (code(&out), blank(&out.stdout), blank(&out.stderr))
    })
}

#[test]
fn the_flock_personality_answers_as_util_linux_flock_does() {
    common::require_flock();
    let dir = Dir::new();
    std::fs::create_dir(dir.path("dir")).unwrap();
    let held: &[&str] = &["lock"];
    let shared: &[&str] = &["-s", "lock"];
    /// A command line, who holds the lock meanwhile, and whether stderr must
    /// be the same to the byte.
    type Case<'a> = (&'a [&'a str], Option<&'a [&'a str]>, bool);
    let cases: Vec<Case> = vec![
        // (command line, held by, compare stderr exactly)
        (&["lock", "true"], None, true),
        (&["-n", "lock", "true"], Some(held), true),
        (&["-n", "-E", "7", "lock", "true"], Some(held), true),
        (&["-w", "0.2", "lock", "true"], Some(held), true),
        (&["-w", "0", "lock", "true"], Some(held), true),
        (&["-n", "-w", "5", "lock", "true"], Some(held), true),
        (&["-s", "-n", "lock", "true"], Some(shared), true),
        (&["-x", "-n", "lock", "true"], Some(shared), true),
        (&["-s", "-n", "lock", "true"], Some(held), true),
        (&["--verbose", "-n", "lock", "true"], Some(held), true),
        (&["--verbose", "lock", "echo", "hi"], None, true),
        (&["-o", "lock", "echo", "closed"], None, true),
        (&["-F", "lock", "echo", "in place"], None, true),
        (&["lock", "-c", "echo $0 >/dev/null; exit 3"], None, true),
        (&["lock", "sh", "-c", "kill -TERM $$"], None, true),
        (&["dir", "echo", "a directory"], None, true),
        (&["-n", "dir", "true"], Some(&["dir"]), true),
        (&["lock", "/no/such/command"], None, false),
        (&["/no/such/dir/lock", "true"], None, false),
        (&[], None, false),
        (&["-n"], None, false),
        (&["-o", "-F", "lock", "true"], None, false),
        (&["lock", "-c"], None, false),
        (&["-E", "300", "lock", "true"], None, false),
        (&["--bogus", "lock", "true"], None, false),
        (&["nine", "true", "x"], None, true),
    ];
    for (args, holder, exact_stderr) in cases {
        let [theirs, ours] = side_by_side(&dir, args, holder);
        assert_eq!(
            ours.0, theirs.0,
            "exit status of flock {args:?}: {ours:?} vs {theirs:?}"
        );
        assert_eq!(ours.1, theirs.1, "stdout of flock {args:?}");
        if exact_stderr || theirs.2.is_empty() {
            assert_eq!(ours.2, theirs.2, "stderr of flock {args:?}");
        } else {
            assert!(
                !ours.2.is_empty(),
                "flock {args:?} says nothing: {theirs:?}"
            );
        }
    }
}

#[test]
fn flock_1_and_the_personality_exclude_each_other_in_every_form() {
    common::require_flock();
    let dir = Dir::new();
    std::fs::create_dir(dir.path("dir")).unwrap();
    let ours = our_flock(&dir);
    let ours = s(&ours);
    // (holder's options and target, contender's, whether they conflict)
    let forms: [(&str, &str, bool); 6] = [
        ("lock", "lock", true),
        ("dir", "dir", true),
        ("-s lock", "-s lock", false),
        ("-s lock", "-x lock", true),
        ("-x lock", "-s lock", true),
        ("lock", "9", true),
    ];
    for (holder, contender, conflict) in forms {
        for (first, second) in [("flock", ours), (ours, "flock")] {
            // The contender of the descriptor form opens fd 9 on the file.
            let attempt = if contender == "9" {
                format!("(exec 9>>lock; {second} -n 9)")
            } else {
                format!("{second} -n {contender} true")
            };
            let script = format!(
                "rm -f ready stop; \
                 {first} {holder} sh -c 'touch ready; while [ ! -e stop ]; do sleep 0.01; done' & \
                 while [ ! -e ready ]; do sleep 0.01; done; \
                 {attempt}; echo $? > status; touch stop; wait"
            );
            let out = std::process::Command::new("sh")
                .args(["-c", &script])
                .current_dir(dir.tmp.path())
                .output()
                .unwrap();
            assert!(out.status.success(), "{out:?}");
            let status = std::fs::read_to_string(dir.path("status")).unwrap();
            let want = if conflict { "1\n" } else { "0\n" };
            assert_eq!(
                status,
                want,
                "`{first} {holder}` then `{second} -n {contender}`: {}",
                stderr(&out)
            );
        }
    }
}

#[test]
fn lockfile_run_locks_and_unlocks_a_descriptor_of_the_calling_shell() {
    common::require_flock();
    let dir = Dir::new();
    let lockfile = env!("CARGO_BIN_EXE_lockfile");
    // The subshell idiom: the shell holds descriptor 9, we lock it for it.
    let script = format!(
        "exec 9>>job.lock; {lockfile} run -n 9 || exit 9; \
         flock -n job.lock true; echo held=$?; \
         {lockfile} run -u 9; flock -n job.lock true; echo after=$?"
    );
    let out = std::process::Command::new("sh")
        .args(["-c", &script])
        .current_dir(dir.tmp.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "held=1\nafter=0\n");
    let (_, report) = inspect_json(&dir.path("job.lock"), &[]);
    assert_eq!(report[0]["state"], "free", "{report}");
    assert_eq!(report[0]["released"], true, "-u marked the record released");
    assert_eq!(report[0]["owner"]["release"], "unrecorded");
}
