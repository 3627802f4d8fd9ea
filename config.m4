dnl phpize && ./configure && make && make install builds this extension with
dnl cargo and installs rediscluster_session.so into PHP's extension directory.

PHP_ARG_ENABLE([rediscluster_session],
  [whether to build the rediscluster session save handler],
  [AS_HELP_STRING([--enable-rediscluster_session],
    [Build the rediscluster session save handler with session locking (default: yes)])],
  [yes], [no])

if test "$PHP_REDISCLUSTER_SESSION" != "no"; then
  AC_PATH_PROG([CARGO], [cargo], [], [$PATH:$HOME/.cargo/bin])
  if test -z "$CARGO"; then
    AC_MSG_ERROR([cargo not found: install Rust 1.88 or newer (https://rustup.rs)])
  fi

  dnl ext-php-rs generates its PHP bindings with bindgen, which loads libclang.
  AC_MSG_CHECKING([for libclang])
  rcs_libclang=no
  for rcs_lib in "$LIBCLANG_PATH"/libclang*.so* /usr/lib/llvm-*/lib/libclang*.so* /usr/lib/*/libclang*.so* /usr/lib64/libclang*.so*; do
    test -e "$rcs_lib" && rcs_libclang=yes
  done
  AC_MSG_RESULT([$rcs_libclang])
  if test "$rcs_libclang" = "no"; then
    AC_MSG_ERROR([libclang not found: install it (Debian/Ubuntu: apt-get install libclang-dev) or set LIBCLANG_PATH])
  fi

  dnl There are no C sources, so no build directory: name the one the module
  dnl lands in, or configure runs "shtool mkdir -p" with no directory at all.
  PHP_ADD_BUILD_DIR([modules])

  dnl ext-php-rs's build script needs php-config as an absolute path.
  rcs_php_config=`command -v "$PHP_PHP_CONFIG"`

  dnl Build through make, so "make" after a source change rebuilds; the
  dnl result lands in modules/, which "make install" copies to extension_dir.
  cat >>Makefile.objects <<EOF
all: cargo_build

cargo_build:
	PHP_CONFIG="$rcs_php_config" PHP="$PHP_EXECUTABLE" "$CARGO" build --release --locked --manifest-path "$abs_srcdir/Cargo.toml"
	mkdir -p modules
	cp "\$\${CARGO_TARGET_DIR:-$abs_srcdir/target}/release/librediscluster_session.so" modules/rediscluster_session.so

clean: cargo_clean

cargo_clean:
	"$CARGO" clean --manifest-path "$abs_srcdir/Cargo.toml"

.PHONY: cargo_build cargo_clean
EOF
fi
