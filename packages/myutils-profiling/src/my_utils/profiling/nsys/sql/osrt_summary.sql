-- name: osrt_summary
-- title: OS runtime waits by call
-- description: One row per OS runtime call traced by nsys (--trace osrt: poll, pthread_cond_wait, read, sem_wait...):
-- description: calls, total/mean/max time. Empty when OS runtime tracing was off.
-- param: limit int 20 How many rows (the largest total first)
SELECT name,
       COUNT(*) AS count,
       SUM(dur) AS total_ns,
       AVG(dur) AS mean_ns,
       MAX(dur) AS max_ns,
       COUNT(DISTINCT tid) AS threads
FROM nsys_osrt
GROUP BY name
ORDER BY total_ns DESC, name
LIMIT :limit
