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
