-- name: launch_short_kernels
-- title: Kernels that ran shorter than the CUDA call that launched them
-- description: One row per (process, device): launches counts the kernels matched to their launching CUDA call
-- description: (same process and correlation id; copies and sets are not kernels and are left out), short those
-- description: whose GPU duration is below the call's CPU duration (the host cannot launch them as fast as they
-- description: run: many small kernels point at launch overhead), with their summed kernel and call time.
WITH calls AS (
  SELECT pid, corr, MIN(start) AS start, MAX(end) AS end FROM nsys_runtime
  WHERE corr IS NOT NULL GROUP BY pid, corr
)
SELECT k.pid,
       k.device,
       COUNT(*) AS launches,
       SUM(CASE WHEN k.dur < c.end - c.start THEN 1 ELSE 0 END) AS short,
       SUM(CASE WHEN k.dur < c.end - c.start THEN k.dur ELSE 0 END) AS short_kernel_ns,
       SUM(CASE WHEN k.dur < c.end - c.start THEN c.end - c.start ELSE 0 END) AS short_call_ns
FROM nsys_kernel k JOIN calls c ON c.pid IS k.pid AND c.corr = k.corr
GROUP BY k.pid, k.device
ORDER BY k.pid, k.device
