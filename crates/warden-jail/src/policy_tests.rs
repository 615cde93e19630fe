use super::*;

#[test]
fn sizes_parse_with_binary_suffixes() {
    assert_eq!(parse_size("512M"), Some(512 << 20));
    assert_eq!(parse_size("2g"), Some(2 << 30));
    assert_eq!(parse_size("64k"), Some(64 << 10));
    assert_eq!(parse_size("100"), Some(100));
    assert_eq!(parse_size("1x"), None);
    assert_eq!(parse_size(""), None);
    assert_eq!(parse_size("99999999999999T"), None);
}

#[test]
fn default_policy_is_valid() {
    Policy::default().validate().unwrap();
}

#[test]
fn binds_may_not_cover_the_jails_own_mounts() {
    for target in [
        "/",
        "/proc",
        "/proc/sys",
        "/dev/null",
        "/workspace",
        "/etc/passwd",
        // The tracer's tools and the folders above them.
        "/var",
        "/var/lib",
        "/var/lib/ldhooks/python",
    ] {
        let mut p = Policy::default();
        p.binds.push(Bind {
            source: "/usr".into(),
            target: Some(target.into()),
            writable: false,
        });
        assert!(
            matches!(p.validate(), Err(PolicyError::ReservedTarget(_))),
            "{target}"
        );
    }
    let mut p = Policy::default();
    p.binds.push(Bind {
        source: "/usr".into(),
        target: Some("/opt/../x".into()),
        writable: false,
    });
    assert!(matches!(p.validate(), Err(PolicyError::BadTarget(_))));
    let mut p = Policy::default();
    p.binds.push(Bind {
        source: "/usr".into(),
        target: Some("/workspace/tools".into()),
        writable: false,
    });
    p.validate().unwrap();
}

#[test]
fn zero_limits_and_bad_env_are_refused() {
    let mut p = Policy::default();
    p.limits.pids = 0;
    assert!(matches!(p.validate(), Err(PolicyError::ZeroLimit("pids"))));
    let mut p = Policy::default();
    p.env.insert("A=B".into(), "x".into());
    assert!(matches!(p.validate(), Err(PolicyError::BadEnvName(_))));
    // The user names a home (`/home/USER`) and a line of /etc/passwd: a plain login name only.
    for bad in ["../etc", "a:b", "x\ny", "", "Alex"] {
        let p = Policy {
            user: bad.into(),
            ..Policy::default()
        };
        assert!(
            matches!(p.validate(), Err(PolicyError::BadUser(_))),
            "{bad:?}"
        );
    }
    let p = Policy {
        user: "alex".into(),
        ..Policy::default()
    };
    assert!(p.validate().is_ok());
}

#[test]
fn toml_with_unknown_fields_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("p.toml");
    std::fs::write(&f, "hostname = 'x'\n[limits]\npids = 10\n").unwrap();
    let p = Policy::from_toml_file(&f).unwrap();
    assert_eq!(p.limits.pids, 10);
    assert_eq!(p.limits.open_files, Limits::default().open_files);
    std::fs::write(&f, "[limits]\nmemroy = 10\n").unwrap();
    assert!(matches!(
        Policy::from_toml_file(&f),
        Err(PolicyError::Parse { .. })
    ));
}

#[test]
fn a_cpu_rate_the_kernel_would_refuse_is_refused_here() {
    let mut p = Policy::default();
    assert_eq!(
        p.limits.cpu_rate_milli, 2000,
        "the default: two CPUs' worth"
    );
    for bad in [1, 9, 4_096_001] {
        p.limits.cpu_rate_milli = bad;
        assert!(
            matches!(
                p.validate(),
                Err(PolicyError::OutOfRange("cpu_rate_milli", _))
            ),
            "{bad}"
        );
    }
    p.limits.cpu_rate_milli = 10;
    p.validate().unwrap();
}
