mod debian/rediscluster_session.ini
