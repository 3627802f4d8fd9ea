//! Reads PHP's session API from the headers of the PHP being built against
//! (`PHP_CONFIG`, as ext-php-rs does for the engine): bindgen generates the
//! `ps_module` struct and the session functions, and a C shim reaches the
//! session globals through PHP's own `PS()` macro, per thread on ZTS builds.
//! Also records which PHP it is, shown by phpinfo(), so an operator can tell
//! a build for another PHP apart at a glance.

use std::path::PathBuf;
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
    session_api(&php_config);
}

/// `OUT_DIR/session.rs` (bindings) and the globals shim, from the PHP headers.
fn session_api(php_config: &str) {
    println!("cargo:rerun-if-changed=src/php/session_globals.c");
    let includes: Vec<String> = Command::new(php_config)
        .arg("--includes")
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| {
            String::from_utf8_lossy(&out.stdout)
                .split_whitespace()
                .map(str::to_owned)
                .collect()
        })
        .expect("php-config --includes: install PHP's headers (Debian: php8.2-dev)");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    bindgen::Builder::default()
        .header_contents(
            "session.h",
            "#include \"php.h\"\n#include \"ext/session/php_session.h\"\n",
        )
        .clang_args(&includes)
        .allowlist_type("ps_module")
        .allowlist_function("php_session_register_module|_php_find_ps_module|php_session_create_id")
        // The engine's types are ext-php-rs's, so the hooks' signatures match.
        .blocklist_type("zend_string|_zend_string|zend_long|zend_result|ZEND_RESULT_CODE")
        .raw_line("use ext_php_rs::ffi::{zend_long, zend_result, zend_string};")
        .layout_tests(false)
        .generate()
        .expect("bindgen could not read ext/session/php_session.h")
        .write_to_file(out.join("session.rs"))
        .expect("writing the session bindings");
    let mut shim = cc::Build::new();
    // A field whose type changed between PHP versions (PS(save_path) became a
    // zend_string in 8.5) must stop the build, not be cast silently: no `-w`
    // (cc's warnings(false)), which silences even these errors.
    shim.file("src/php/session_globals.c")
        .extra_warnings(false)
        .flag("-Werror=incompatible-pointer-types")
        .flag("-Werror=int-conversion");
    for include in &includes {
        shim.include(include.trim_start_matches("-I"));
    }
    shim.compile("rediscluster_session_globals");
}
