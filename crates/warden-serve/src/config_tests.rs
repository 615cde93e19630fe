use super::*;

#[test]
fn builtin_profiles_validate() {
    let c = ConfigFile::default().validate(None).unwrap();
    assert_eq!(c.profile.name, "code");
    assert!(c.profile.tools.contains(&"run_command"));
    let c = ConfigFile::default().validate(Some("readonly")).unwrap();
    assert!(!c.profile.tools.contains(&"run_command"));
    assert!(!c.profile.tools.contains(&"file_write"));
    assert!(c.profile.tools.contains(&"file_read"));
}

#[test]
fn unknown_profiles_tools_and_fields_are_refused() {
    assert!(matches!(
        ConfigFile::default().validate(Some("nope")),
        Err(ConfigError::NoProfile(_))
    ));
    let f: ConfigFile =
        toml::from_str("[profiles.x]\ntools = ['run_command', 'format_disk']\n").unwrap();
    assert!(matches!(
        f.validate(Some("x")),
        Err(ConfigError::UnknownTool { .. })
    ));
    assert!(toml::from_str::<ConfigFile>("[profiles.x]\ntols = []\n").is_err());
    let f: ConfigFile =
        toml::from_str("[profiles.x]\ndefault_timeout_s = 10\nmax_timeout_s = 5\n").unwrap();
    assert!(matches!(
        f.validate(Some("x")),
        Err(ConfigError::BadProfile { .. })
    ));
}

#[test]
fn custom_profiles_override_builtin_ones_by_name() {
    let f: ConfigFile = toml::from_str(
        "profile = 'code'\n[profiles.code]\nallowed_programs = ['ls']\n[profiles.code.limits]\npids = 7\n",
    )
    .unwrap();
    let c = f.validate(None).unwrap();
    assert_eq!(c.profile.allowed_programs, Some(vec!["ls".to_string()]));
    assert_eq!(c.profile.policy.limits.pids, 7);
    assert!(c.profile.tools.contains(&"run_python"));
}

#[test]
fn web_tools_need_somewhere_to_go() {
    // The code profile carries the web tools; with no `[web]` they are simply not listed.
    let c = ConfigFile::default().validate(None).unwrap();
    assert!(c.profile.tools.contains(&"web_fetch"));
    assert!(!c.settings.web.pages() && c.settings.web.search.is_none());
    // A profile of web tools alone with nothing configured is an error, not an empty server.
    let e = ConfigFile::default().validate(Some("web")).unwrap_err();
    assert!(e.to_string().contains("[web] allow"), "{e}");
    let ok: ConfigFile =
        toml::from_str("[web]\nallow = ['docs.rs', '*.python.org', 'svc.test:8080']\n").unwrap();
    assert!(ok.validate(Some("web")).is_ok());
    for bad in [
        "[web]\nallow = ['10.0.0.1']\n",
        "[web]\nallow = ['https://docs.rs']\n",
        "[web]\nallow = ['docs.rs:0']\n",
        "[web]\nallow = ['docs.rs']\nmax_bytes = 10\n",
        "[web]\nallow = ['docs.rs']\ndefault_bytes = 0\n",
        "[web.search]\nbackend = 'searxng'\n",
        "[web.search]\nbackend = 'searxng'\nurl = 'ftp://x.test'\n",
        "[web.search]\nbackend = 'brave'\n",
        "[web.search]\nbackend = 'brave'\napi_key_env = 'WARDEN_SURELY_UNSET_VARIABLE'\n",
    ] {
        let f: ConfigFile = toml::from_str(bad).unwrap();
        assert!(
            matches!(f.validate(Some("web")), Err(ConfigError::Web(_))),
            "{bad}"
        );
    }
    assert!(toml::from_str::<ConfigFile>("[web]\nalow = []\n").is_err());
}
