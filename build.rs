//! Records which PHP the extension is built against, shown by phpinfo(), so an
//! operator can tell a build for another PHP apart at a glance, and whether it
//! is a thread-safe (ZTS) build, whose session globals are reached differently.
//! ext-php-rs's own build script does the binding work with the same `PHP_CONFIG`.

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

    println!("cargo::rustc-check-cfg=cfg(php_zts)");
    let zts = Command::new(&php_config)
        .arg("--php-binary")
        .output()
        .ok()
        .and_then(|out| {
            let php = String::from_utf8_lossy(&out.stdout).trim().to_owned();
            Command::new(php)
                .args(["-n", "-r", "echo PHP_ZTS;"])
                .output()
                .ok()
        })
        .is_some_and(|out| out.stdout == b"1");
    if zts {
        println!("cargo:rustc-cfg=php_zts");
    }
}
