#!/usr/bin/env bash
# Checks the PHP-extension build path: phpize && ./configure && make && make install,
# in a scratch copy of the working tree, installed under a scratch INSTALL_ROOT,
# then loads the installed rediscluster_session.so and checks that composer.json
# (what PIE reads) describes it.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$ROOT" && git ls-files -co --exclude-standard -z | xargs -0 tar -cf - ) | tar -xf - -C "$work"
cd "$work"
phpize >/dev/null
./configure >configure.log || { cat configure.log; die "configure failed"; }
# Reuse the project's cargo cache: config.m4 builds with the same PHP_CONFIG.
CARGO_TARGET_DIR="$ROOT/target" make >make.log 2>&1 || { tail -40 make.log; die "make failed"; }
CARGO_TARGET_DIR="$ROOT/target" make install INSTALL_ROOT="$work/root" >/dev/null
so="$work/root$(php-config --extension-dir)/rediscluster_session.so"
[ -f "$so" ] || die "make install did not install rediscluster_session.so"
# Not `php -m | grep -q`: with pipefail, grep leaving at the first match
# fails php's next write (SIGPIPE), which a loaded machine makes likely.
modules=$(php -n -d "extension=$so" -m) || die "the installed module does not load"
grep -qx rediscluster_session <<<"$modules" || die "the installed module does not load"
log "phpize build: ok ($(du -k "$so" | cut -f1) KiB installed)"

# Debian's Composer (2.5) predates the php-ext section in its schema, so it can
# only warn about it; the section's rules from PIE's documentation are checked here.
validation=$(composer validate --no-check-publish --no-interaction "$ROOT/composer.json" 2>&1) \
    || { printf '%s\n' "$validation"; die "composer validate failed"; }
php -n -d "extension=$so" -r '
    $c = json_decode(file_get_contents($argv[1]), true, 512, JSON_THROW_ON_ERROR);
    $ext = $c["php-ext"] ?? [];
    $problems = [];
    if ($c["type"] !== "php-ext") $problems[] = "type must be php-ext";
    $name = $ext["extension-name"] ?? "";
    if (!preg_match("/^[A-Za-z][a-zA-Z0-9_]+$/", $name)) $problems[] = "extension-name is not a valid extension name";
    if (!extension_loaded($name)) $problems[] = "extension-name $name is not the name the module loads under";
    foreach (["support-zts", "support-nts"] as $flag) {
        if (!is_bool($ext[$flag] ?? null)) $problems[] = "$flag must be set to true or false";
    }
    if (!PHP_ZTS && $ext["support-nts"] !== true) $problems[] = "support-nts must be true: this NTS build works";
    $families = ["windows", "bsd", "darwin", "solaris", "linux", "unknown"];
    if (array_diff($ext["os-families"] ?? [], $families)) $problems[] = "unknown os-families";
    // A prebuilt archive where one matches (scripts/pie-binaries.sh), else a build from source.
    if (($ext["download-url-method"] ?? null) !== ["pre-packaged-binary", "composer-default"]) $problems[] = "download-url-method must try the prebuilt archive, then the source";
    if ($problems) { fwrite(STDERR, implode("\n", $problems) . "\n"); exit(1); }
' "$ROOT/composer.json" || die "composer.json does not describe the extension PIE would build"
log "composer.json: valid for PIE (php-ext, extension-name, support flags)"
