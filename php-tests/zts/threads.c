/* Runs PHP code on several threads of one process at once through the embed
 * SAPI, as thread-safe servers (FrankenPHP, Apache's worker MPM) run PHP:
 *   threads COUNT CODE        (php.ini from PHPRC)
 * Exits with the number of threads whose request could not start. */
#include <pthread.h>
#include <stdlib.h>

#include <sapi/embed/php_embed.h>

#define MAX_THREADS 64

static const char *code;

static void *run(void *unused)
{
	(void)unused;
	(void)ts_resource(0);
	if (php_request_startup() == FAILURE) {
		ts_free_thread();
		return (void *)1;
	}
	SG(headers_sent) = 1;
	SG(request_info).no_headers = 1;
	zend_try {
		zend_eval_string(code, NULL, "thread");
	} zend_end_try();
	php_request_shutdown(NULL);
	ts_free_thread();
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t threads[MAX_THREADS];
	int count, i, failed = 0;

	if (argc != 3 || (count = atoi(argv[1])) < 1 || count > MAX_THREADS) {
		return 2;
	}
	code = argv[2];
	if (php_embed_init(argc, argv) == FAILURE) {
		return 1;
	}
	for (i = 0; i < count; i++) {
		pthread_create(&threads[i], NULL, run, NULL);
	}
	for (i = 0; i < count; i++) {
		void *result;
		pthread_join(threads[i], &result);
		failed += result != NULL;
	}
	php_embed_shutdown();
	return failed;
}
