use super::*;

/// A fresh directory for one test.
fn scratch(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hypclear-files-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn json_is_replaced_in_one_step_without_leftovers() {
    let dir = scratch("atomic");
    let p = dir.join("out.json");
    std::fs::write(&p, "old").unwrap();
    write_json(&p, &serde_json::json!({"cells": [1, 2]})).unwrap();
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    assert_eq!(v["cells"][1], 2);
    assert_eq!(v["schema_version"], SCHEMA_VERSION);
    assert_eq!(names(&dir), ["out.json"], "temporary file left behind");
    // A directory as the target: the error names it, nothing is left.
    assert!(write_json(&dir, &serde_json::json!({})).is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_failed_write_keeps_the_last_good_file_and_leaves_no_temporary() {
    let dir = scratch("enospc");
    let p = dir.join("out.json");
    std::fs::write(&p, "last good").unwrap();
    let err = write_atomically(&p, |w| {
        w.write_all(b"half")?;
        Err(std::io::Error::from_raw_os_error(libc::ENOSPC))
    })
    .unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENOSPC));
    assert_eq!(std::fs::read_to_string(&p).unwrap(), "last good");
    assert_eq!(names(&dir), ["out.json"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn while_writing_no_name_exists_where_the_filesystem_has_o_tmpfile() {
    let dir = scratch("tmpfile");
    let p = dir.join("out.json");
    let dfd = open_dir(&dir).unwrap();
    let unnamed = rfs::openat(
        &dfd,
        ".",
        OFlags::TMPFILE | OFlags::WRONLY,
        Mode::from_raw_mode(0o600),
    );
    write_atomically(&p, |w| {
        if unnamed.is_ok() {
            assert!(
                names(&dir).is_empty(),
                "a name exists mid-write: {:?}",
                names(&dir)
            );
        }
        w.write_all(b"{}")
    })
    .unwrap();
    assert_eq!(names(&dir), ["out.json"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn stale_temporaries_of_ended_processes_are_swept_others_kept() {
    let dir = scratch("sweep");
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    let stale = format!(".out.json.tmp-{dead}-1f");
    let running = ".out.json.tmp-1-2a".to_string();
    let foreign = format!(".other.json.tmp-{dead}-3b");
    for n in [&stale, &running, &foreign] {
        std::fs::write(dir.join(n), "x").unwrap();
    }
    let out = dir.join("out.json");
    precheck_output(&out, Precheck::Writable).unwrap();
    let all = [foreign.as_str(), &running, &stale];
    assert_eq!(names(&dir), all, "the precheck lists no directory");
    write_json(&out, &serde_json::json!({})).unwrap();
    assert_eq!(
        names(&dir),
        [foreign.as_str(), &running, "out.json"],
        "only the ended process's is gone, at the first write"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn targets_that_cannot_hold_a_result_are_refused_before_the_run() {
    for how in [Precheck::Kind, Precheck::Writable] {
        refused_by_kind(how);
    }
}

fn refused_by_kind(how: Precheck) {
    let dir = scratch(&format!("targets-{how:?}"));
    let refused = |p: &Path| match precheck_output(p, how) {
        Err(FileError::BadTarget { why, .. }) => why,
        other => panic!("{how:?} {}: {other:?}", p.display()),
    };
    assert!(refused(&dir).contains("directory"));
    let slash = PathBuf::from(format!("{}/new.json/", dir.display()));
    assert!(refused(&slash).contains("ending in `/`"));
    let fifo = dir.join("fifo");
    rustix::fs::mknodat(
        rfs::CWD,
        &fifo,
        rfs::FileType::Fifo,
        Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    let t = std::time::Instant::now();
    assert!(refused(&fifo).contains("no reader"));
    assert!(
        t.elapsed() < std::time::Duration::from_secs(1),
        "the open blocked"
    );
    assert!(precheck_output(&dir.join("new.json"), how).is_ok());
    assert!(precheck_output(Path::new("/dev/null"), how).is_ok());
    assert!(
        names(&dir) == ["fifo"],
        "the precheck left {:?}",
        names(&dir)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `Kind` tells from the path and its type alone: a name in a directory
/// that does not exist passes it, and only `Writable` (a probe file in
/// that directory) refuses it.
#[test]
fn only_the_writable_precheck_tries_the_directory() {
    let dir = scratch("kind");
    let missing = dir.join("gone").join("out.json");
    assert!(precheck_output(&missing, Precheck::Kind).is_ok());
    assert!(matches!(
        precheck_output(&missing, Precheck::Writable),
        Err(FileError::Unwritable { .. })
    ));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_fifo_with_a_reader_gets_the_final_document_once() {
    let dir = scratch("fifo");
    let fifo = dir.join("fifo");
    rustix::fs::mknodat(
        rfs::CWD,
        &fifo,
        rfs::FileType::Fifo,
        Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
    };
    // The reader's open blocks until a writer comes: wait for the precheck to see it.
    let t = std::time::Instant::now();
    while let Err(FileError::BadTarget { .. }) = precheck_output(&fifo, Precheck::Writable) {
        assert!(
            t.elapsed() < std::time::Duration::from_secs(5),
            "no reader came"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    write_json_checkpoint(&fifo, &serde_json::json!({"partial": true})).unwrap();
    write_json(&fifo, &serde_json::json!({"partial": false})).unwrap();
    let text = reader.join().unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).expect("one document");
    assert_eq!(v["partial"], false);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn reads_are_bounded_dev_zero_included() {
    let t = std::time::Instant::now();
    match read_bounded(Path::new("/dev/zero"), 1 << 20) {
        Err(FileError::TooLarge { limit, .. }) => assert_eq!(limit, 1 << 20),
        other => panic!("{other:?}"),
    }
    assert!(t.elapsed() < std::time::Duration::from_secs(1));
}

#[test]
fn duplicate_keys_are_refused_at_any_depth() {
    let p = Path::new("x.json");
    let v = parse_json(p, br#"{"a": [1, {"b": null}], "c": -2.5e3, "d": "s"}"#).unwrap();
    assert_eq!(
        v,
        serde_json::json!({"a": [1, {"b": null}], "c": -2500.0, "d": "s"})
    );
    for doc in [
        &br#"{"schema_version": 1, "schema_version": 99}"#[..],
        br#"{"cells": [{"x": 1, "x": 2}]}"#,
    ] {
        match parse_json(p, doc) {
            Err(FileError::Malformed { detail, .. }) => {
                assert!(detail.contains("twice"), "{detail}")
            }
            other => panic!("{other:?}"),
        }
    }
    assert!(parse_json(p, b"{} {}").is_err(), "trailing data");
}

#[test]
fn private_dir_is_tightened_and_its_files_never_followed() {
    use std::os::unix::fs::PermissionsExt;
    let base = scratch("private");
    let dir = base.join("hypclear");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let d = PrivateDir::open(&dir).unwrap();
    let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);
    // A planted symlink: reading refuses it, writing replaces it.
    let victim = base.join("victim");
    std::fs::write(&victim, "precious").unwrap();
    std::os::unix::fs::symlink(&victim, dir.join("cache.json")).unwrap();
    assert!(matches!(
        d.read("cache.json", 4096),
        Err(FileError::Unreadable { .. })
    ));
    d.write("cache.json", b"{}").unwrap();
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    assert_eq!(d.read("cache.json", 4096).unwrap().unwrap(), b"{}");
    // Pointing at /dev/zero: refused at once, not read for ever.
    std::fs::remove_file(dir.join("cache.json")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", dir.join("cache.json")).unwrap();
    let t = std::time::Instant::now();
    assert!(d.read("cache.json", 4096).is_err());
    assert!(t.elapsed() < std::time::Duration::from_secs(1));
    std::fs::write(dir.join("big.json"), vec![b' '; 5000]).unwrap();
    assert!(matches!(
        d.read("big.json", 4096),
        Err(FileError::TooLarge { .. })
    ));
    assert!(d.read("missing.json", 4096).unwrap().is_none());
    // A symlinked directory is refused.
    let link = base.join("linked");
    std::os::unix::fs::symlink(&dir, &link).unwrap();
    assert!(PrivateDir::open(&link).is_err());
    // A missing directory (and its parents) is made, this user's only.
    let made = base.join("cache/hypclear");
    PrivateDir::open(&made).unwrap();
    let mode = std::fs::metadata(&made).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);
    if rustix::process::geteuid().is_root() {
        // Someone else's directory (root can make one) is refused.
        let theirs = base.join("theirs");
        std::fs::create_dir(&theirs).unwrap();
        std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
        assert!(matches!(
            PrivateDir::open(&theirs),
            Err(FileError::BadTarget { .. })
        ));
    }
    std::fs::remove_dir_all(&base).unwrap();
}
