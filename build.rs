//! Records which PHP the extension is built against, shown by phpinfo(), so an
//! operator can tell a build for another PHP apart at a glance. ext-php-rs's
//! own build script does the binding work with the same `PHP_CONFIG`.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=PHP_CONFIG");
    println!("cargo:rerun-if-changed=build.rs");
    let php_config = std::env::var("PHP_CONFIG").unwrap_or_else(|_| "php-config".into());
    let version = Command::new(&php_config)
        .arg("--version")
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=RCS_BUILT_FOR_PHP={version}");
}
