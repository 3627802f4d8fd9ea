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

/* A call into the session module: one of the functions below, or its request
 * startup (a session.auto_start session) or shutdown (the request's final
 * write). Each runs between rediscluster_session_call(1, ...) and (0, ...),
 * which give it one time budget for every hook it runs, across the two
 * handlers session_regenerate_id() uses. That one also tells the request
 * state that it runs: the hooks PHP calls in between (destroy or write, close,
 * open, create_sid, read) are the only ones that move a session's lifetime
 * from one id to another, and nothing else tells them apart from
 * session_destroy() followed by session_start(). */
void rediscluster_session_call(int running, int regenerating);

/* The session functions that run the save handler's hooks (session_gc()'s
 * runs none of ours), each with whether it is session_regenerate_id(). */
#define SESSION_FUNCTIONS(X) \
	X(session_start, 0) X(session_write_close, 0) X(session_commit, 0) \
	X(session_abort, 0) X(session_reset, 0) X(session_destroy, 0) \
	X(session_create_id, 0) X(session_regenerate_id, 1)

static void call_function(zif_handler handler, int regenerating, INTERNAL_FUNCTION_PARAMETERS)
{
	rediscluster_session_call(1, regenerating);
	/* A fatal error inside (an error handler's, say) jumps out: the call
	 * must not outlive it into the shutdown functions' sessions. */
	zend_try {
		handler(INTERNAL_FUNCTION_PARAM_PASSTHRU);
	} zend_catch {
		rediscluster_session_call(0, regenerating);
		zend_bailout();
	} zend_end_try();
	rediscluster_session_call(0, regenerating);
}

/* One wrapper per function, so that a copy of the function (a first-class
 * callable, Closure::fromCallable()) still reaches its own handler. */
#define WRAPPER(name, regenerating) \
	static zif_handler name##_handler; \
	static ZEND_NAMED_FUNCTION(rediscluster_##name) \
	{ \
		call_function(name##_handler, regenerating, INTERNAL_FUNCTION_PARAM_PASSTHRU); \
	}
SESSION_FUNCTIONS(WRAPPER)

typedef struct {
	const char *name;
	size_t length;
	zif_handler *original;
	zif_handler wrapper;
} wrapped_function;

#define ENTRY(name, regenerating) \
	{#name, sizeof(#name) - 1, &name##_handler, rediscluster_##name},
static const wrapped_function wrapped_functions[] = {SESSION_FUNCTIONS(ENTRY)};

static zend_function *find_function(const wrapped_function *wrapped)
{
	zend_function *function = zend_hash_str_find_ptr(CG(function_table), wrapped->name, wrapped->length);
	return function && function->type == ZEND_INTERNAL_FUNCTION ? function : NULL;
}

typedef __typeof__(((zend_module_entry *)0)->request_startup_func) module_handler;
static zend_module_entry *session_module;
static module_handler session_request_startup, session_request_shutdown;

static zend_result call_module(module_handler handler, int type, int module_number)
{
	zend_result result = FAILURE;
	rediscluster_session_call(1, 0);
	zend_try {
		result = handler(type, module_number);
	} zend_catch {
		rediscluster_session_call(0, 0);
		zend_bailout();
	} zend_end_try();
	rediscluster_session_call(0, 0);
	return result;
}

static PHP_RINIT_FUNCTION(rediscluster_session_call)
{
	return call_module(session_request_startup, type, module_number);
}

static PHP_RSHUTDOWN_FUNCTION(rediscluster_session_call)
{
	return call_module(session_request_shutdown, type, module_number);
}

/* Puts the wrappers in place, at MINIT. Returns NULL, or the name of what it
 * did not find (the others are wrapped all the same). */
const char *rediscluster_session_wrap_calls(void)
{
	const char *missing = NULL;
	for (size_t i = 0; i < sizeof(wrapped_functions) / sizeof(wrapped_functions[0]); i++) {
		const wrapped_function *wrapped = &wrapped_functions[i];
		zend_function *function = find_function(wrapped);
		if (!function) {
			missing = missing ? missing : wrapped->name;
		} else if (function->internal_function.handler != wrapped->wrapper) {
			*wrapped->original = function->internal_function.handler;
			function->internal_function.handler = wrapped->wrapper;
		}
	}
	session_module = zend_hash_str_find_ptr(&module_registry, "session", sizeof("session") - 1);
	if (!session_module || !session_module->request_startup_func || !session_module->request_shutdown_func) {
		session_module = NULL;
		return missing ? missing : "request startup and shutdown";
	}
	if (session_module->request_startup_func != ZEND_MODULE_ACTIVATE_N(rediscluster_session_call)) {
		session_request_startup = session_module->request_startup_func;
		session_module->request_startup_func = ZEND_MODULE_ACTIVATE_N(rediscluster_session_call);
		session_request_shutdown = session_module->request_shutdown_func;
		session_module->request_shutdown_func = ZEND_MODULE_DEACTIVATE_N(rediscluster_session_call);
	}
	return missing;
}

/* Gives each its own handler back, at MSHUTDOWN. */
void rediscluster_session_unwrap_calls(void)
{
	for (size_t i = 0; i < sizeof(wrapped_functions) / sizeof(wrapped_functions[0]); i++) {
		const wrapped_function *wrapped = &wrapped_functions[i];
		zend_function *function = find_function(wrapped);
		if (function && function->internal_function.handler == wrapped->wrapper) {
			function->internal_function.handler = *wrapped->original;
		}
	}
	if (session_module) {
		session_module->request_startup_func = session_request_startup;
		session_module->request_shutdown_func = session_request_shutdown;
		session_module = NULL;
	}
}

/* Raises a message of `level` through PHP's error machinery. Returns 1 when
 * PHP bailed out of it (the application's error handler died with a fatal
 * error): the caller frees what it owns and goes on with
 * rediscluster_session_bailout(). */
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
