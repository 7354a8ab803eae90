-- name: kernel_summary
-- title: Kernels by total GPU time
-- description: One row per kernel name (all devices together): its kind (computation, communication, memory,
-- description: other), launches, total/mean/min/max/std duration and its share of all kernel time.
-- param: limit int 20 How many rows (the largest total first)
-- param: kind text null Only kernels of this kind (computation, communication, memory, other)
-- param: device int null Only this device
SELECT kind,
       short_name,
       name,
       COUNT(*) AS count,
       SUM(dur) AS total_ns,
       AVG(dur) AS mean_ns,
       MIN(dur) AS min_ns,
       MAX(dur) AS max_ns,
       sqrt(MAX(AVG(1.0 * dur * dur) - AVG(dur) * AVG(dur), 0)) AS std_ns,
       100.0 * SUM(dur) / (SELECT NULLIF(SUM(dur), 0) FROM nsys_kernel
                           WHERE :device IS NULL OR device = :device) AS share_pct
FROM nsys_kernel
WHERE (:kind IS NULL OR kind = :kind) AND (:device IS NULL OR device = :device)
GROUP BY name_id
ORDER BY total_ns DESC, name
LIMIT :limit
