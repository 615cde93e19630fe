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
