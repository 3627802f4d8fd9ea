/* PS(save_path) reached through PHP's own macro: a plain global on NTS
 * builds, a per-thread slot behind TSRM on thread-safe (ZTS) builds. Rust
 * cannot expand the macro, and a hand-written offset would drift from the
 * headers. */
#include "php.h"
#include "ext/session/php_session.h"

char **rediscluster_session_save_path_slot(void)
{
	return &PS(save_path);
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
