-- name: cuda_api_summary
-- title: CUDA API time by call
-- description: One row per CUDA runtime/driver API name: calls, total/mean/min/max/std time on the calling threads
-- description: and the share of all traced API time.
-- param: limit int 20 How many rows (the largest total first)
SELECT name,
       COUNT(*) AS count,
       SUM(dur) AS total_ns,
       AVG(dur) AS mean_ns,
       MIN(dur) AS min_ns,
       MAX(dur) AS max_ns,
       sqrt(MAX(AVG(1.0 * dur * dur) - AVG(dur) * AVG(dur), 0)) AS std_ns,
       100.0 * SUM(dur) / (SELECT NULLIF(SUM(dur), 0) FROM nsys_runtime) AS share_pct
FROM nsys_runtime
GROUP BY name
ORDER BY total_ns DESC, name
LIMIT :limit
