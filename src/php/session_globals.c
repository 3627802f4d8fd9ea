/* PS(save_path) reached through PHP's own macro: a plain global on NTS
 * builds, a per-thread slot behind TSRM on thread-safe (ZTS) builds. Rust
 * cannot expand the macro, and a hand-written offset would drift from the
 * headers. */
#include "php.h"
#include "ext/session/php_session.h"

/* PS(save_path) is a C string up to PHP 8.4 and a zend_string from 8.5 on.
 * Rust sees an opaque value, the text it holds, and copies made here. */
void *rediscluster_session_save_path(void)
{
	return (void *)PS(save_path);
}

void rediscluster_session_set_save_path(void *value)
{
#if PHP_VERSION_ID >= 80500
	PS(save_path) = (zend_string *)value;
#else
	PS(save_path) = (char *)value;
#endif
}

const char *rediscluster_session_save_path_text(const void *value)
{
#if PHP_VERSION_ID >= 80500
	return value ? ZSTR_VAL((const zend_string *)value) : NULL;
#else
	return (const char *)value;
#endif
}

/* A value of PS(save_path)'s type holding `text`, malloc'ed: it may stay in
 * PS(save_path) past the request that set it. */
void *rediscluster_session_save_path_new(const char *text, size_t len)
{
#if PHP_VERSION_ID >= 80500
	return zend_string_init(text, len, 1);
#else
	return pestrndup(text, len, 1);
#endif
}

/* Frees a value of rediscluster_session_save_path_new(). PHP takes no
 * reference to it (session_save_path() returns a copy of the text); a debug
 * build asserts that. */
void rediscluster_session_save_path_release(void *value)
{
#if PHP_VERSION_ID >= 80500
	zend_string_free((zend_string *)value);
#else
	pefree(value, 1);
#endif
}

/* Whether a session is active and served by `module`: what
 * rediscluster_session_set_lifetime() needs. */
int rediscluster_session_active_with(const ps_module *module)
{
	return PS(session_status) == php_session_active && PS(mod) == module;
}

/* session_regenerate_id() runs between these two calls: the hooks PHP calls
 * in between (destroy or write, close, open, create_sid, read) are the only
 * ones that move a session's lifetime from one id to another. Nothing else
 * tells them apart from session_destroy() followed by session_start(). */
void rediscluster_session_regenerating(int running);

static zif_handler regenerate_id_handler;

static ZEND_NAMED_FUNCTION(rediscluster_session_regenerate_id)
{
	rediscluster_session_regenerating(1);
	/* A fatal error inside (an error handler's, say) jumps out: the flag
	 * must not outlive the call into the shutdown functions' sessions. */
	zend_try {
		regenerate_id_handler(INTERNAL_FUNCTION_PARAM_PASSTHRU);
	} zend_catch {
		rediscluster_session_regenerating(0);
		zend_bailout();
	} zend_end_try();
	rediscluster_session_regenerating(0);
}

static zend_function *regenerate_id_function(void)
{
	return zend_hash_str_find_ptr(CG(function_table), "session_regenerate_id",
		sizeof("session_regenerate_id") - 1);
}

int rediscluster_session_wrap_regenerate_id(void)
{
	zend_function *function = regenerate_id_function();
	if (!function || function->type != ZEND_INTERNAL_FUNCTION) {
		return 0;
	}
	if (function->internal_function.handler != rediscluster_session_regenerate_id) {
		regenerate_id_handler = function->internal_function.handler;
		function->internal_function.handler = rediscluster_session_regenerate_id;
	}
	return 1;
}

void rediscluster_session_unwrap_regenerate_id(void)
{
	zend_function *function = regenerate_id_function();
	if (function && function->type == ZEND_INTERNAL_FUNCTION
		&& function->internal_function.handler == rediscluster_session_regenerate_id) {
		function->internal_function.handler = regenerate_id_handler;
	}
}

/* Raises a message of `level` through PHP's error machinery. Returns 1 when
 * PHP bailed out of it (the application's error handler died with a fatal
 * error): the caller records what that leaves undone, frees what it owns, and
 * goes on with rediscluster_session_bailout(). */
int rediscluster_session_raise(int level, const char *text)
{
	volatile int bailed_out = 0;
	zend_try {
		php_error_docref(NULL, level, "%s", text);
	} zend_catch {
		bailed_out = 1;
	} zend_end_try();
	return bailed_out;
}

void rediscluster_session_bailout(void)
{
	zend_bailout();
}
